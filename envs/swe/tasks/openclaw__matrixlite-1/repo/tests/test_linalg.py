import pytest

from matrixlite import Matrix, determinant, is_symmetric, power, trace


def test_trace_and_determinant():
    m = Matrix([[2, 1, 0], [1, 3, 1], [0, 1, 4]])
    assert trace(m) == 9
    assert determinant(m) == pytest.approx(18.0)
    assert determinant(Matrix([[1, 2], [2, 4]])) == 0.0
    with pytest.raises(ValueError):
        determinant(Matrix([[1, 2, 3]]))


def test_is_symmetric():
    assert is_symmetric(Matrix([[1, 7], [7, 2]]))
    assert not is_symmetric(Matrix([[1, 7], [0, 2]]))


def test_power():
    m = Matrix([[1, 1], [1, 0]])
    assert power(m, 5) == Matrix([[8, 5], [5, 3]])
    assert power(m, 0) == Matrix.identity(2)
