"""Determinant, inverse, solve and rank on many random matrices, against definitions and identities."""

import itertools
import random
import unittest
from fractions import Fraction

from linalg import Matrix, SingularMatrixError, determinant, inverse, rank, solve


def leibniz(matrix):
    """The determinant by its definition: a signed sum over all permutations."""
    n = matrix.shape[0]
    total = Fraction(0)
    for perm in itertools.permutations(range(n)):
        inversions = sum(1 for i in range(n) for j in range(i + 1, n) if perm[i] > perm[j])
        term = Fraction(-1 if inversions % 2 else 1)
        for i in range(n):
            term *= matrix[i, perm[i]]
        total += term
    return total


def random_matrix(rng, n, m=None, low=-9, high=9):
    return Matrix([[rng.randint(low, high) for _ in range(m or n)] for _ in range(n)])


class RandomMatrixTest(unittest.TestCase):
    def report(self, wrong, total, what):
        if wrong:
            example = min(wrong, key=lambda w: w[0].shape[0])
            self.fail(f"{len(wrong)} of {total} {what}; e.g. {example[0]}: got {example[1]}, expected {example[2]}")

    def test_determinant_matches_the_definition(self):
        rng = random.Random(51)
        wrong, total = [], 0
        for n in (1, 2, 3, 4, 5, 6):
            for _ in range(200 if n < 6 else 90):
                m = random_matrix(rng, n)
                got, want = determinant(m), leibniz(m)
                total += 1
                if got != want:
                    wrong.append((m, got, want))
        self.report(wrong, total, "determinants differ from the Leibniz formula")

    def test_determinant_is_multiplicative(self):
        rng = random.Random(52)
        wrong = []
        for _ in range(500):
            n = rng.randint(2, 6)
            a, b = random_matrix(rng, n), random_matrix(rng, n)
            got, want = determinant(a * b), determinant(a) * determinant(b)
            if got != want:
                wrong.append((a * b, got, want))
        self.report(wrong, 500, "det(AB) differ from det(A) det(B)")

    def test_swapping_two_rows_flips_the_sign(self):
        rng = random.Random(53)
        wrong = []
        for _ in range(600):
            n = rng.randint(2, 7)
            m = random_matrix(rng, n)
            i, j = rng.sample(range(n), 2)
            rows = [list(r) for r in m.rows]
            rows[i], rows[j] = rows[j], rows[i]
            swapped = Matrix(rows)
            if determinant(swapped) != -determinant(m):
                wrong.append((swapped, determinant(swapped), -determinant(m)))
        self.report(wrong, 600, "row swaps did not flip the determinant")

    def test_transpose_keeps_the_determinant(self):
        rng = random.Random(54)
        wrong = []
        for _ in range(600):
            m = random_matrix(rng, rng.randint(1, 7))
            if determinant(m.transpose()) != determinant(m):
                wrong.append((m, determinant(m.transpose()), determinant(m)))
        self.report(wrong, 600, "transposes changed the determinant")

    def test_inverse_times_matrix_is_identity(self):
        rng = random.Random(55)
        for _ in range(250):
            n = rng.randint(1, 6)
            m = random_matrix(rng, n)
            try:
                inv = inverse(m)
            except SingularMatrixError:
                self.assertEqual(determinant(m), 0)
                continue
            self.assertEqual(inv * m, Matrix.identity(n), m)
            self.assertEqual(determinant(inv) * determinant(m), 1, m)

    def test_solve_solves(self):
        rng = random.Random(56)
        for _ in range(500):
            n = rng.randint(1, 7)
            m = random_matrix(rng, n)
            b = [rng.randint(-20, 20) for _ in range(n)]
            try:
                x = solve(m, b)
            except SingularMatrixError:
                continue
            self.assertEqual((m * Matrix([[v] for v in x])).column(0), b)

    def test_rank_of_products_and_stacks(self):
        rng = random.Random(57)
        for _ in range(500):
            n, k, m = rng.randint(1, 6), rng.randint(1, 6), rng.randint(1, 6)
            a, b = random_matrix(rng, n, k, -3, 3), random_matrix(rng, k, m, -3, 3)
            self.assertLessEqual(rank(a * b), min(rank(a), rank(b)))
            self.assertEqual(rank(a), rank(a.transpose()))


if __name__ == "__main__":
    unittest.main()
