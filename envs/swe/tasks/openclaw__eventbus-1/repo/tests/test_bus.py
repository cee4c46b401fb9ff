from eventbus import EventBus, Recorder


def test_handlers_run_in_subscription_order():
    bus = EventBus()
    calls = []
    bus.subscribe("e", lambda: calls.append("a"))
    bus.subscribe("e", lambda: calls.append("b"))
    bus.subscribe("other", lambda: calls.append("x"))
    bus.emit("e")
    assert calls == ["a", "b"]


def test_priority_runs_first():
    bus = EventBus()
    calls = []
    bus.subscribe("e", lambda: calls.append("low"))
    bus.subscribe("e", lambda: calls.append("high"), priority=5)
    bus.subscribe("e", lambda: calls.append("low2"))
    bus.emit("e")
    assert calls == ["high", "low", "low2"]


def test_emit_passes_arguments_and_returns_results():
    bus = EventBus()
    bus.subscribe("add", lambda a, b=0: a + b)
    bus.subscribe("add", lambda a, b=0: a * b)
    assert bus.emit("add", 3, b=4) == [7, 12]
    assert bus.emit("nobody-listens") == []


def test_unsubscribe():
    bus = EventBus()
    calls = []

    def handler():
        calls.append("h")

    cancel = bus.subscribe("e", lambda: calls.append("cancelled"))
    bus.subscribe("e", handler)
    cancel()
    assert bus.unsubscribe("e", handler)
    assert not bus.unsubscribe("e", handler)
    bus.emit("e")
    assert calls == []


def test_once_handler_runs_once():
    bus = EventBus()
    calls = []
    bus.subscribe("ready", lambda: calls.append(1), once=True)
    bus.emit("ready")
    bus.emit("ready")
    assert calls == [1]
    assert bus.handlers("ready") == []


def test_decorator_and_recorder():
    bus = EventBus()
    recorder = Recorder(bus, "saved", "deleted")

    @bus.on("saved", priority=1)
    def first(item):
        return f"saved {item}"

    assert bus.emit("saved", "doc")[0] == "saved doc"
    bus.emit("deleted", "doc", soft=True)
    assert recorder.events() == ["saved", "deleted"]
    assert recorder.calls[1] == ("deleted", ("doc",), {"soft": True})
