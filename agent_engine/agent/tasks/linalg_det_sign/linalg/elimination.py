"""Gaussian elimination with partial pivoting, and what it gives: determinant, rank, solve, inverse."""

from fractions import Fraction

from linalg.matrix import Matrix


class SingularMatrixError(ValueError):
    """The matrix has no inverse (its determinant is 0)."""


def eliminate(matrix):
    """``(rows, sign, pivots)``: the row echelon form of ``matrix`` as a list of lists, the sign of the
    row permutation it took (each swap of two rows flips it) and the pivot columns, in order.

    Partial pivoting: each step's pivot is the entry of largest absolute value in its column."""
    rows = [list(r) for r in matrix.rows]
    n_rows, n_cols = matrix.shape
    sign, pivots, top = 1, [], 0
    for col in range(n_cols):
        if top == n_rows:
            break
        best = max(range(top, n_rows), key=lambda r: abs(rows[r][col]))
        if rows[best][col] == 0:
            continue
        if best != top:
            rows[top], rows[best] = rows[best], rows[top]
            sign = -sign
        pivot = rows[top][col]
        for r in range(top + 1, n_rows):
            factor = rows[r][col] / pivot
            if factor:
                rows[r] = [a - factor * b for a, b in zip(rows[r], rows[top], strict=False)]
        pivots.append(col)
        top += 1
    return rows, sign, pivots


def determinant(matrix):
    """The determinant of a square matrix."""
    n, m = matrix.shape
    if n != m:
        raise ValueError("the determinant needs a square matrix")
    rows, sign, pivots = eliminate(matrix)
    if len(pivots) < n:
        return Fraction(0)
    product = Fraction(1)
    for i in range(n):
        product *= rows[i][i]
    return product


def rank(matrix):
    """The number of linearly independent rows."""
    return len(eliminate(matrix)[2])


def solve(matrix, vector):
    """The x with ``matrix * x == vector`` (a list), for a square invertible matrix."""
    n, m = matrix.shape
    if n != m or len(vector) != n:
        raise ValueError("solve needs a square matrix and a vector of its size")
    augmented = Matrix([list(r) + [v] for r, v in zip(matrix.rows, vector, strict=False)])
    rows, _, pivots = eliminate(augmented)
    if len(pivots) < n or pivots[-1] == n:
        raise SingularMatrixError("the matrix is singular")
    x = [Fraction(0)] * n
    for i in reversed(range(n)):
        x[i] = (rows[i][n] - sum(rows[i][j] * x[j] for j in range(i + 1, n))) / rows[i][i]
    return x


def inverse(matrix):
    """The inverse of a square matrix (SingularMatrixError when there is none)."""
    n, m = matrix.shape
    if n != m:
        raise ValueError("the inverse needs a square matrix")
    columns = [solve(matrix, [1 if i == j else 0 for i in range(n)]) for j in range(n)]
    return Matrix(columns).transpose()
