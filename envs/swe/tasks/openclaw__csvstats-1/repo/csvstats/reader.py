import csv
import io


def read_columns(text, delimiter=","):
    """Maps each header name to its column's cells (stripped strings, "" when blank).

    Wholly blank lines are skipped; a row with the wrong number of fields is an error.
    """
    rows = list(csv.reader(io.StringIO(text), delimiter=delimiter))
    if not rows:
        return {}
    header, *body = rows
    header = [name.strip() for name in header]
    if len(set(header)) != len(header):
        raise ValueError("duplicate column names")
    columns = {name: [] for name in header}
    for lineno, row in enumerate(body, start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise ValueError(f"line {lineno}: expected {len(header)} fields, got {len(row)}")
        for name, cell in zip(header, row):
            columns[name].append(cell.strip())
    return columns
