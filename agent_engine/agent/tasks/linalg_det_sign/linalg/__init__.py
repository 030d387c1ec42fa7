"""linalg: exact linear algebra over the rationals (matrices of ``fractions.Fraction``)."""

from linalg.elimination import SingularMatrixError, determinant, eliminate, inverse, rank, solve
from linalg.matrix import Matrix

__all__ = ["Matrix", "SingularMatrixError", "determinant", "eliminate", "inverse", "rank", "solve"]
