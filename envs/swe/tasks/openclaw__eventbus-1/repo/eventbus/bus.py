from dataclasses import dataclass


@dataclass(eq=False)
class _Subscription:
    handler: object
    once: bool
    priority: int


class EventBus:
    def __init__(self):
        self._subscriptions = {}

    def subscribe(self, event, handler, *, once=False, priority=0):
        """Calls handler on every emit of event (only the first, if once); returns a function
        that cancels the subscription."""
        subs = self._subscriptions.setdefault(event, [])
        sub = _Subscription(handler, once, priority)
        index = next((i for i, other in enumerate(subs) if other.priority < priority), len(subs))
        subs.insert(index, sub)
        return lambda: self._remove(event, sub)

    def on(self, event, *, once=False, priority=0):
        """Decorator form of subscribe."""

        def register(handler):
            self.subscribe(event, handler, once=once, priority=priority)
            return handler

        return register

    def unsubscribe(self, event, handler):
        """Removes every subscription of handler to event; says whether there was any."""
        subs = self._subscriptions.get(event, [])
        before = len(subs)
        subs[:] = [sub for sub in subs if sub.handler != handler]
        return len(subs) != before

    def _remove(self, event, sub):
        subs = self._subscriptions.get(event, [])
        if sub in subs:
            subs.remove(sub)

    def handlers(self, event):
        return [sub.handler for sub in self._subscriptions.get(event, [])]

    def emit(self, event, *args, **kwargs):
        """Calls the event's handlers with the arguments; returns their results in order."""
        results = []
        for sub in self._subscriptions.get(event, []):
            if sub.once:
                self._remove(event, sub)
            results.append(sub.handler(*args, **kwargs))
        return results

    def clear(self, event=None):
        if event is None:
            self._subscriptions.clear()
        else:
            self._subscriptions.pop(event, None)
