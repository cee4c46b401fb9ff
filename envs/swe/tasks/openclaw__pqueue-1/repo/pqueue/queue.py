import heapq


class Empty(Exception):
    pass


class PriorityQueue:
    """Pops the item with the lowest priority number first."""

    def __init__(self, items=()):
        self._heap = []
        for item, priority in items:
            self.push(item, priority)

    def __len__(self):
        return len(self._heap)

    def __bool__(self):
        return bool(self._heap)

    def push(self, item, priority=0):
        heapq.heappush(self._heap, (priority, item))

    def pop_with_priority(self):
        if not self._heap:
            raise Empty("pop from an empty priority queue")
        priority, item = heapq.heappop(self._heap)
        return item, priority

    def pop(self):
        return self.pop_with_priority()[0]

    def peek(self):
        if not self._heap:
            raise Empty("peek at an empty priority queue")
        return self._heap[0][-1]

    def peek_priority(self):
        if not self._heap:
            raise Empty("peek at an empty priority queue")
        return self._heap[0][0]

    def drain(self):
        """Pops everything, in order."""
        while self._heap:
            yield self.pop()
