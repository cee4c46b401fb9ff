from .matrix import Matrix


def _require_square(m):
    nrows, ncols = m.shape
    if nrows != ncols:
        raise ValueError(f"expected a square matrix, got {m.shape}")
    return nrows


def trace(m):
    n = _require_square(m)
    return sum(m[i, i] for i in range(n))


def determinant(m):
    """By Gaussian elimination with partial pivoting (a float)."""
    n = _require_square(m)
    a = [[float(x) for x in row] for row in m.rows]
    det = 1.0
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        if a[pivot][col] == 0:
            return 0.0
        if pivot != col:
            a[col], a[pivot] = a[pivot], a[col]
            det = -det
        det *= a[col][col]
        for r in range(col + 1, n):
            f = a[r][col] / a[col][col]
            for c in range(col, n):
                a[r][c] -= f * a[col][c]
    return det


def is_symmetric(m):
    return m.shape[0] == m.shape[1] and m == m.transpose()


def gram(m):
    """The Gram matrix Mᵀ·M (columns' dot products)."""
    return m.transpose() @ m


def power(m, k):
    n = _require_square(m)
    if k < 0:
        raise ValueError("negative powers are not supported")
    result = Matrix.identity(n)
    for _ in range(k):
        result = result @ m
    return result
