import pytest

from inifile import DuplicateKeyError, ParseError, parse

SAMPLE = """
# application settings
[server]
host = localhost
Port = 8080
debug = yes

; storage
[storage]
path = /var/lib/app
"""


def test_sections_and_values():
    ini = parse(SAMPLE)
    assert ini.sections() == ["server", "storage"]
    assert ini.get("server", "host") == "localhost"
    assert ini.get("storage", "path") == "/var/lib/app"


def test_keys_are_case_insensitive():
    ini = parse(SAMPLE)
    assert ini.get("server", "PORT") == "8080"
    assert ini.items("server") == {"host": "localhost", "port": "8080", "debug": "yes"}


def test_typed_getters():
    ini = parse(SAMPLE)
    assert ini.getint("server", "port") == 8080
    assert ini.getboolean("server", "debug") is True
    assert ini.getint("server", "workers", default=4) == 4


def test_missing_key_raises_without_default():
    ini = parse(SAMPLE)
    with pytest.raises(KeyError):
        ini.get("server", "user")


def test_key_outside_section_is_an_error():
    with pytest.raises(ParseError) as err:
        parse("name = x\n[s]\n")
    assert err.value.lineno == 1


def test_line_without_equals_is_an_error():
    with pytest.raises(ParseError):
        parse("[s]\njust some words\n")


def test_duplicate_keys():
    text = "[s]\na = 1\nA = 2\n"
    with pytest.raises(DuplicateKeyError):
        parse(text)
    assert parse(text, allow_duplicates=True).get("s", "a") == "2"
