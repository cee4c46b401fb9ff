from pathlib import Path


def test_one_file_per_content():
    files = sorted(p.name for p in Path("/app/photos").iterdir())
    assert files == ["a.jpg", "b.jpg", "d.jpg"]


def test_kept_contents():
    assert not Path("/app/photos/c.jpg").exists()
    assert Path("/app/photos/a.jpg").read_text() == "sunset\n"
    assert Path("/app/photos/d.jpg").read_text() == "forest\n"
