from slugkit import slugify_all, unique_slug


def test_unique_slug_avoids_taken():
    taken = {"release-notes", "release-notes-2"}
    assert unique_slug("Release notes", taken) == "release-notes-3"
    assert "release-notes-3" in taken


def test_unique_slug_empty_title():
    assert unique_slug("???", set()) == "untitled"


def test_slugify_all():
    assert slugify_all(["Intro", "Intro", "Setup", "intro!"]) == [
        "intro", "intro-2", "setup", "intro-3",
    ]
