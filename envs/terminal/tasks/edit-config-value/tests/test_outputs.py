from pathlib import Path

EXPECTED = """[web]
host = localhost
port = 8080

[database]
host = db.internal
port = 5432
name = shop
"""


def test_only_database_host_changed():
    assert Path("/app/config.ini").read_text() == EXPECTED
