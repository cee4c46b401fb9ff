from .queue import PriorityQueue


class Scheduler:
    """Runs jobs (callables) once their time has come; times are plain numbers."""

    def __init__(self):
        self._queue = PriorityQueue()

    def __len__(self):
        return len(self._queue)

    def schedule(self, at, job):
        self._queue.push(job, priority=at)

    def next_time(self):
        return self._queue.peek_priority() if self._queue else None

    def run_due(self, now):
        """Runs, in time order, every job scheduled at or before now; returns their results."""
        results = []
        while self._queue and self._queue.peek_priority() <= now:
            results.append(self._queue.pop()())
        return results
