"""An immutable matrix of Fractions."""

from fractions import Fraction


class Matrix:
    def __init__(self, rows):
        rows = [[Fraction(x) for x in row] for row in rows]
        if not rows or any(len(r) != len(rows[0]) for r in rows) or not rows[0]:
            raise ValueError("a matrix needs equal, non-empty rows")
        self.rows = tuple(tuple(r) for r in rows)

    @classmethod
    def identity(cls, n):
        return cls([[1 if i == j else 0 for j in range(n)] for i in range(n)])

    @property
    def shape(self):
        return len(self.rows), len(self.rows[0])

    def __getitem__(self, index):
        i, j = index
        return self.rows[i][j]

    def __eq__(self, other):
        return isinstance(other, Matrix) and self.rows == other.rows

    def __hash__(self):
        return hash(self.rows)

    def __repr__(self):
        return f"Matrix({[[str(x) for x in r] for r in self.rows]})"

    def __add__(self, other):
        if self.shape != other.shape:
            raise ValueError("shapes differ")
        return Matrix([[a + b for a, b in zip(r, s, strict=False)] for r, s in zip(self.rows, other.rows, strict=False)])

    def __mul__(self, other):
        if isinstance(other, Matrix):
            if self.shape[1] != other.shape[0]:
                raise ValueError("inner dimensions differ")
            columns = list(zip(*other.rows, strict=False))
            return Matrix([[sum(a * b for a, b in zip(r, c, strict=False)) for c in columns] for r in self.rows])
        return Matrix([[a * other for a in r] for r in self.rows])

    __rmul__ = __mul__

    def transpose(self):
        return Matrix(list(zip(*self.rows, strict=False)))

    def column(self, j):
        return [r[j] for r in self.rows]
