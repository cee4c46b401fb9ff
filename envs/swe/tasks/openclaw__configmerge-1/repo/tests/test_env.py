import pytest

from configmerge import from_env, merge


def test_from_env_nests_and_converts():
    environ = {"APP_DB__HOST": "db", "APP_DB__PORT": "6543", "APP_DEBUG": "true",
               "APP_RATIO": "0.5", "HOME": "/root"}
    assert from_env(environ) == {"db": {"host": "db", "port": 6543}, "debug": True, "ratio": 0.5}


def test_value_and_section_conflict():
    with pytest.raises(ValueError):
        from_env({"APP_DB": "x", "APP_DB__HOST": "y"})


def test_env_layer_on_top():
    config = merge({"db": {"host": "localhost", "port": 5432}}, from_env({"APP_DB__PORT": "1"}))
    assert config == {"db": {"host": "localhost", "port": 1}}
