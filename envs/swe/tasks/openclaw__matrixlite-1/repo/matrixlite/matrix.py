class Matrix:
    """A matrix stored as a list of rows."""

    def __init__(self, rows):
        rows = [list(row) for row in rows]
        if not rows or not rows[0]:
            raise ValueError("a matrix needs at least one row and one column")
        if any(len(row) != len(rows[0]) for row in rows):
            raise ValueError("all rows must have the same length")
        self.rows = rows

    @classmethod
    def identity(cls, n):
        return cls([[1 if i == j else 0 for j in range(n)] for i in range(n)])

    @classmethod
    def zeros(cls, nrows, ncols):
        return cls([[0] * ncols for _ in range(nrows)])

    @property
    def shape(self):
        return len(self.rows), len(self.rows[0])

    def __getitem__(self, index):
        i, j = index
        return self.rows[i][j]

    def __eq__(self, other):
        if not isinstance(other, Matrix):
            return NotImplemented
        return self.rows == other.rows

    def _check_same_shape(self, other):
        if self.shape != other.shape:
            raise ValueError(f"shapes differ: {self.shape} and {other.shape}")

    def __add__(self, other):
        self._check_same_shape(other)
        return Matrix([[a + b for a, b in zip(r, s)] for r, s in zip(self.rows, other.rows)])

    def __sub__(self, other):
        self._check_same_shape(other)
        return Matrix([[a - b for a, b in zip(r, s)] for r, s in zip(self.rows, other.rows)])

    def scale(self, factor):
        return Matrix([[factor * x for x in row] for row in self.rows])

    def __matmul__(self, other):
        if self.shape[1] != other.shape[0]:
            raise ValueError(f"cannot multiply {self.shape} by {other.shape}")
        columns = list(zip(*other.rows))
        return Matrix([[sum(a * b for a, b in zip(row, col)) for col in columns]
                       for row in self.rows])

    def transpose(self):
        n = len(self.rows)
        return Matrix([[self.rows[i][j] for i in range(n)] for j in range(n)])

    def __repr__(self):
        return f"Matrix({self.rows!r})"
