from dataclasses import dataclass


@dataclass(frozen=True)
class Unit:
    """A unit: value_in_base = (value + offset) * factor."""

    symbol: str
    dimension: str
    factor: float
    offset: float = 0.0

    def to_base(self, value):
        return (value + self.offset) * self.factor

    def from_base(self, value):
        return (value - self.offset) / self.factor


UNITS = {u.symbol: u for u in [
    Unit("m", "length", 1.0),
    Unit("km", "length", 1000.0),
    Unit("cm", "length", 0.01),
    Unit("mm", "length", 0.001),
    Unit("in", "length", 0.0254),
    Unit("ft", "length", 0.3048),
    Unit("mi", "length", 1609.344),
    Unit("kg", "mass", 1.0),
    Unit("g", "mass", 0.001),
    Unit("lb", "mass", 0.45359237),
    Unit("oz", "mass", 0.028349523125),
    Unit("s", "time", 1.0),
    Unit("min", "time", 60.0),
    Unit("h", "time", 3600.0),
    Unit("d", "time", 86400.0),
    Unit("K", "temperature", 1.0),
    Unit("C", "temperature", 1.0, 273.15),
    Unit("F", "temperature", 5 / 9, 459.67),
]}

ALIASES = {"°C": "C", "°F": "F", "celsius": "C", "fahrenheit": "F", "kelvin": "K",
           "hr": "h", "sec": "s", "lbs": "lb"}


def get_unit(symbol):
    try:
        return UNITS[ALIASES.get(symbol, symbol)]
    except KeyError:
        raise KeyError(f"unknown unit {symbol!r}") from None
