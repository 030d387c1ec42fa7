import unittest
from fractions import Fraction

from linalg import Matrix


class MatrixTest(unittest.TestCase):
    def test_entries_are_fractions(self):
        m = Matrix([[1, "1/2"], [0.25, 3]])
        self.assertEqual(m[0, 1], Fraction(1, 2))
        self.assertEqual(m[1, 0], Fraction(1, 4))

    def test_shape(self):
        self.assertEqual(Matrix([[1, 2, 3], [4, 5, 6]]).shape, (2, 3))

    def test_ragged_rows_are_refused(self):
        with self.assertRaises(ValueError):
            Matrix([[1, 2], [3]])

    def test_empty_is_refused(self):
        with self.assertRaises(ValueError):
            Matrix([])

    def test_identity(self):
        self.assertEqual(Matrix.identity(2), Matrix([[1, 0], [0, 1]]))

    def test_product(self):
        a = Matrix([[1, 2], [3, 4]])
        b = Matrix([[0, 1], [1, 0]])
        self.assertEqual(a * b, Matrix([[2, 1], [4, 3]]))

    def test_product_shapes_must_agree(self):
        with self.assertRaises(ValueError):
            Matrix([[1, 2]]) * Matrix([[1, 2]])

    def test_scalar_product(self):
        self.assertEqual(2 * Matrix([[1, 2]]), Matrix([[2, 4]]))

    def test_sum(self):
        self.assertEqual(Matrix([[1, 2]]) + Matrix([[3, 4]]), Matrix([[4, 6]]))

    def test_transpose(self):
        self.assertEqual(Matrix([[1, 2, 3]]).transpose(), Matrix([[1], [2], [3]]))

    def test_column(self):
        self.assertEqual(Matrix([[1, 2], [3, 4]]).column(1), [2, 4])


if __name__ == "__main__":
    unittest.main()
