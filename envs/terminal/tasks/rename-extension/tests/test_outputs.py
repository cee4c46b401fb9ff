from pathlib import Path

N = Path("/app/notes")
NAMES = ["alpha", "beta", "gamma", "delta notes", "epsilon"]


def test_no_txt_left():
    assert not list(N.glob("*.txt"))


def test_md_files_keep_contents():
    for n in NAMES:
        assert (N / f"{n}.md").read_text() == f"note {n}\n", n
