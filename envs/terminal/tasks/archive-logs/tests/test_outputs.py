import tarfile
from pathlib import Path


def test_archive_holds_only_logs():
    with tarfile.open("/app/logs.tar.gz", "r:gz") as t:
        names = sorted(m.name for m in t.getmembers() if m.isfile())
    assert names == ["logs/app.log", "logs/db.log", "logs/web.log"]


def test_contents_kept_and_originals_left():
    with tarfile.open("/app/logs.tar.gz", "r:gz") as t:
        assert t.extractfile("logs/db.log").read() == b"db started\n"
    assert Path("/app/logs/keep.txt").is_file()
    assert Path("/app/logs/app.log").is_file()
