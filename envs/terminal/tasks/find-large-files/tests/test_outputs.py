from pathlib import Path


def test_large_files_listed_sorted():
    assert Path("/app/large.txt").read_text().split() == ["big.bin", "huge.log", "z.dat"]
