import pytest

from matrixlite import Matrix


def test_construction_checks_rows():
    with pytest.raises(ValueError):
        Matrix([])
    with pytest.raises(ValueError):
        Matrix([[1, 2], [3]])
    assert Matrix([[1, 2, 3]]).shape == (1, 3)


def test_add_and_subtract():
    a = Matrix([[1, 2], [3, 4]])
    b = Matrix([[10, 20], [30, 40]])
    assert a + b == Matrix([[11, 22], [33, 44]])
    assert b - a == Matrix([[9, 18], [27, 36]])
    with pytest.raises(ValueError):
        a + Matrix([[1, 2]])


def test_matmul_rectangular():
    a = Matrix([[1, 2, 3], [4, 5, 6]])
    b = Matrix([[7, 8], [9, 10], [11, 12]])
    assert a @ b == Matrix([[58, 64], [139, 154]])
    with pytest.raises(ValueError):
        a @ a


def test_identity_and_scale():
    m = Matrix([[1, 2], [3, 4]])
    assert m @ Matrix.identity(2) == m
    assert m.scale(2) == Matrix([[2, 4], [6, 8]])


def test_transpose_square():
    m = Matrix([[1, 2], [3, 4]])
    assert m.transpose() == Matrix([[1, 3], [2, 4]])
    assert m.transpose().transpose() == m
