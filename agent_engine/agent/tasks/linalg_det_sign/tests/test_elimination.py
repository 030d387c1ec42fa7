import unittest
from fractions import Fraction

from linalg import Matrix, SingularMatrixError, determinant, inverse, rank, solve


class EliminationTest(unittest.TestCase):
    def test_determinant_2x2(self):
        self.assertEqual(determinant(Matrix([[3, 8], [4, 6]])), -14)

    def test_determinant_of_a_swap(self):
        self.assertEqual(determinant(Matrix([[0, 1], [1, 0]])), -1)

    def test_determinant_3x3(self):
        self.assertEqual(determinant(Matrix([[6, 1, 1], [4, -2, 5], [2, 8, 7]])), -306)

    def test_determinant_of_a_triangular_matrix(self):
        self.assertEqual(determinant(Matrix([[2, 5, 7], [0, 3, 1], [0, 0, 4]])), 24)

    def test_determinant_of_a_singular_matrix(self):
        self.assertEqual(determinant(Matrix([[1, 2], [2, 4]])), 0)

    def test_determinant_of_fractions(self):
        self.assertEqual(determinant(Matrix([["1/2", "1/3"], ["1/4", "1/5"]])), Fraction(1, 60))

    def test_determinant_needs_a_square_matrix(self):
        with self.assertRaises(ValueError):
            determinant(Matrix([[1, 2, 3]]))

    def test_rank(self):
        self.assertEqual(rank(Matrix([[1, 2, 3], [2, 4, 6], [1, 0, 1]])), 2)

    def test_rank_of_a_row(self):
        self.assertEqual(rank(Matrix([[0, 0, 5]])), 1)

    def test_solve(self):
        self.assertEqual(solve(Matrix([[2, 1], [1, 3]]), [3, 5]), [Fraction(4, 5), Fraction(7, 5)])

    def test_solve_singular(self):
        with self.assertRaises(SingularMatrixError):
            solve(Matrix([[1, 2], [2, 4]]), [1, 2])

    def test_inverse(self):
        self.assertEqual(inverse(Matrix([[4, 7], [2, 6]])), Matrix([["3/5", "-7/10"], ["-1/5", "2/5"]]))

    def test_inverse_of_a_singular_matrix(self):
        with self.assertRaises(SingularMatrixError):
            inverse(Matrix([[1, 1], [1, 1]]))


if __name__ == "__main__":
    unittest.main()
