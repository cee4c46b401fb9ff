import pytest

from mdtable import cell_text, is_number, render, render_dicts


def test_text_columns_are_left_aligned():
    assert render(["a", "colour"], [["x", "red"], ["yy", "green"]]) == "\n".join([
        "| a   | colour |",
        "| --- | ------ |",
        "| x   | red    |",
        "| yy  | green  |",
    ])


def test_integer_columns_are_right_aligned():
    assert render(["name", "qty"], [["apple", 3], ["kiwi", 12]]) == "\n".join([
        "| name  | qty |",
        "| ----- | --: |",
        "| apple |   3 |",
        "| kiwi  |  12 |",
    ])


def test_explicit_alignment():
    table = render(["k", "v"], [["a", "b"]], align=["center", "right"])
    assert table.splitlines()[1] == "| :-: | --: |"
    assert table.splitlines()[2] == "|  a  |   b |"
    with pytest.raises(ValueError):
        render(["k"], [["a"]], align=["middle"])


def test_cells_are_escaped_and_none_is_blank():
    assert cell_text("a|b\nc") == "a\\|b c"
    assert render(["x", "n"], [[None, 1], ["z", None]]).splitlines()[2:] == [
        "|     |   1 |",
        "| z   |     |",
    ]


def test_ragged_rows_are_rejected():
    with pytest.raises(ValueError, match="row 2"):
        render(["a", "b"], [[1, 2], [3]])


def test_render_dicts():
    table = render_dicts([{"id": 1, "name": "ann"}, {"id": 2, "role": "admin"}])
    assert table.splitlines()[0] == "|  id | name | role  |"
    assert table.splitlines()[3] == "|   2 |      | admin |"


def test_is_number():
    assert is_number("42") and is_number("1,024")
    assert not is_number("abc") and not is_number("") and not is_number("4 kg")
