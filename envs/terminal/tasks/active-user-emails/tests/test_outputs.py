from pathlib import Path


def test_active_emails():
    assert Path("/app/emails.txt").read_text().splitlines() == [
        "ann@example.com",
        "bo@example.com",
        "zed@example.com",
    ]
