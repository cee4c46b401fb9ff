import pytest

from pqueue import Empty, PriorityQueue


def test_lowest_priority_first():
    q = PriorityQueue()
    q.push("write report", 2)
    q.push("fix outage", 0)
    q.push("reply to email", 1)
    assert list(q.drain()) == ["fix outage", "reply to email", "write report"]
    assert not q


def test_peek_and_len():
    q = PriorityQueue([("b", 5), ("a", 3)])
    assert len(q) == 2
    assert q.peek() == "a" and q.peek_priority() == 3
    assert len(q) == 2


def test_pop_with_priority():
    q = PriorityQueue([("x", 1.5)])
    assert q.pop_with_priority() == ("x", 1.5)


def test_empty_queue():
    q = PriorityQueue()
    with pytest.raises(Empty):
        q.pop()
    with pytest.raises(Empty):
        q.peek()
