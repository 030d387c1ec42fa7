"""Write rows as CSV text: a field is quoted only when it must be."""

from csvlite.dialect import EXCEL


def needs_quotes(value, dialect):
    return any(c in value for c in (dialect.delimiter, dialect.quote, "\r", "\n")) \
        or value[:1].isspace() or value[-1:].isspace()


def format_field(value, dialect=EXCEL):
    """One field as written: quoted (quotes doubled) when it holds a delimiter, a quote, a line break
    or leading or trailing blanks."""
    value = "" if value is None else str(value)
    if not needs_quotes(value, dialect):
        return value
    q = dialect.quote
    return q + value.replace(q, q + q) + q


def write_rows(rows, dialect=EXCEL):
    """The CSV text of ``rows`` (each row a sequence of values), every row ended by the line end.
    A row of one empty field is written as ``""`` so that it reads back as a row."""
    lines = []
    for row in rows:
        fields = [format_field(v, dialect) for v in row]
        if fields == [""]:
            fields = [dialect.quote * 2]
        lines.append(dialect.delimiter.join(fields) + dialect.line_end)
    return "".join(lines)


def write_dicts(records, fields, dialect=EXCEL):
    """A header row of ``fields`` and one row per dict (a missing key writes an empty field)."""
    return write_rows([list(fields)] + [[r.get(f, "") for f in fields] for r in records], dialect)
