class Recorder:
    """Subscribes to events and keeps what was emitted (handy in tests)."""

    def __init__(self, bus, *events):
        self.calls = []
        for event in events:
            bus.subscribe(event, self._handler_for(event))

    def _handler_for(self, event):
        def record(*args, **kwargs):
            self.calls.append((event, args, kwargs))

        return record

    def events(self):
        return [event for event, _, _ in self.calls]
