from pqueue import Scheduler


def test_runs_due_jobs_in_time_order():
    s = Scheduler()
    s.schedule(30, lambda: "c")
    s.schedule(10, lambda: "a")
    s.schedule(20, lambda: "b")
    assert s.run_due(now=5) == []
    assert s.run_due(now=20) == ["a", "b"]
    assert s.next_time() == 30
    assert s.run_due(now=100) == ["c"]
    assert s.next_time() is None and len(s) == 0
