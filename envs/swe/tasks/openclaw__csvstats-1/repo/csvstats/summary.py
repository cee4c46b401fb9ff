from .reader import read_columns
from .stats import mean, median


def _as_numbers(cells):
    """The cells as floats, or None if any of them is not a number."""
    numbers = []
    for cell in cells:
        try:
            numbers.append(float(cell.replace(",", "")))
        except ValueError:
            return None
    return numbers


def summarize_column(cells):
    """A dict describing one column's cells."""
    present = [cell for cell in cells if cell != ""]
    summary = {"count": len(present), "missing": len(cells) - len(present)}
    numbers = _as_numbers(cells)
    if numbers is None or not present:
        summary["unique"] = len(set(present))
        return summary
    summary.update(
        min=min(numbers),
        max=max(numbers),
        mean=mean(numbers),
        median=median(numbers),
    )
    return summary


def summarize(text, delimiter=","):
    return {name: summarize_column(cells)
            for name, cells in read_columns(text, delimiter).items()}


def format_summary(summary):
    width = max((len(name) for name in summary), default=0)
    lines = []
    for name, info in summary.items():
        fields = "  ".join(f"{key} {value:g}" if isinstance(value, float) else f"{key} {value}"
                           for key, value in info.items())
        lines.append(f"{name:<{width}}  {fields}")
    return "\n".join(lines)
