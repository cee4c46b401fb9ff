from dataclasses import dataclass
from datetime import date, timedelta

ONE_DAY = timedelta(days=1)


@dataclass(frozen=True)
class DateRange:
    """The dates from start to end, both included."""

    start: date
    end: date

    def __post_init__(self):
        if self.end < self.start:
            raise ValueError(f"range ends ({self.end}) before it starts ({self.start})")

    @classmethod
    def single(cls, day):
        return cls(day, day)

    def __len__(self):
        return (self.end - self.start).days + 1

    def __contains__(self, day):
        return self.start <= day <= self.end

    def __iter__(self):
        day = self.start
        while day <= self.end:
            yield day
            day += ONE_DAY

    def overlaps(self, other):
        """Whether the two ranges have at least one day in common."""
        return self.start < other.end and other.start < self.end

    def intersection(self, other):
        """The days in both ranges, or None if there are none."""
        if not self.overlaps(other):
            return None
        return DateRange(max(self.start, other.start), min(self.end, other.end))

    def shift(self, days):
        delta = timedelta(days=days)
        return DateRange(self.start + delta, self.end + delta)

    def months(self):
        """Splits the range at month boundaries."""
        parts = []
        start = self.start
        while start <= self.end:
            if start.month == 12:
                next_month = date(start.year + 1, 1, 1)
            else:
                next_month = date(start.year, start.month + 1, 1)
            end = min(self.end, next_month - ONE_DAY)
            parts.append(DateRange(start, end))
            start = next_month
        return parts

    def __str__(self):
        return f"{self.start.isoformat()}..{self.end.isoformat()}"
