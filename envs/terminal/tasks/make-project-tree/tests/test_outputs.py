from pathlib import Path

P = Path("/app/project")


def test_folders():
    for d in ["src", "tests", "docs"]:
        assert (P / d).is_dir(), d


def test_init_is_empty():
    f = P / "src" / "__init__.py"
    assert f.is_file() and f.stat().st_size == 0


def test_readme():
    assert (P / "README.md").read_text().splitlines()[0] == "# project"
