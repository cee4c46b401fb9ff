import pytest

from lrucache import LRUCache


def test_put_and_get():
    cache = LRUCache(maxsize=4)
    cache.put("a", 1)
    assert cache.get("a") == 1
    assert cache.get("missing") is None
    assert cache.get("missing", 0) == 0


def test_evicts_oldest_when_full():
    cache = LRUCache(maxsize=2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("c", 3)
    assert "a" not in cache
    assert cache.keys() == ["b", "c"]


def test_put_refreshes_existing_key():
    cache = LRUCache(maxsize=2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("a", 10)
    cache.put("c", 3)
    assert cache.keys() == ["a", "c"]
    assert cache.peek("a") == 10


def test_hit_and_miss_counters():
    cache = LRUCache()
    cache.put(1, "one")
    cache.get(1)
    cache.get(2)
    cache.get(1)
    assert (cache.hits, cache.misses) == (2, 1)
    cache.clear()
    assert len(cache) == 0 and cache.hits == 0


def test_maxsize_must_be_positive():
    with pytest.raises(ValueError):
        LRUCache(maxsize=0)
