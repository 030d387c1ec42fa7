"""Parse CSV text into rows of strings, one character at a time.

A field is quoted when it starts with the quote character: it then runs to the next quote that is not
doubled, and may hold delimiters, line breaks and quotes written twice (``""`` stands for one ``"``).
Rows end at ``\\n``, ``\\r\\n`` or ``\\r`` outside quotes; an empty line is a row without fields, and a
final line break adds no row.
"""

from csvlite.dialect import EXCEL

START, UNQUOTED, QUOTED, AFTER_QUOTE = range(4)


class CSVError(ValueError):
    """The text is not valid CSV for the dialect."""


def read_rows(text, dialect=EXCEL):
    """The rows of ``text`` as lists of strings."""
    d, q = dialect.delimiter, dialect.quote
    rows, row, field = [], [], []
    state = START
    i, n = 0, len(text)
    line = 1

    def end_field():
        row.append("".join(field))
        field.clear()

    def end_row():
        end_field()
        rows.append(list(row))
        row.clear()

    while i < n:
        ch = text[i]
        if state == QUOTED:
            if ch == q:
                if i + 1 < n and text[i + 1] == q:
                    field.append(q)
                    i += 1  # the pair is one literal quote
                    continue
                state = AFTER_QUOTE
            else:
                if ch == "\n":
                    line += 1
                field.append(ch)
            i += 1
            continue
        if ch == d:
            end_field()
            state = START
        elif ch in "\r\n":
            if state == START and not row:
                rows.append([])  # an empty line is a row without fields
            else:
                end_row()
            state = START
            if ch == "\r" and i + 1 < n and text[i + 1] == "\n":
                i += 1
            line += 1
        elif state == START and ch == q:
            state = QUOTED
        elif state == AFTER_QUOTE:
            if dialect.strict:
                raise CSVError(f"line {line}: {ch!r} after a closing quote")
            field.append(ch)
            state = UNQUOTED
        else:
            field.append(ch)
            state = UNQUOTED
        i += 1
    if state == QUOTED:
        raise CSVError(f"line {line}: the text ends inside a quoted field")
    if field or row or state == AFTER_QUOTE:
        end_row()
    return rows


def read_dicts(text, dialect=EXCEL):
    """The rows after the first as dicts keyed by the first row (the header); a short row is an error."""
    rows = read_rows(text, dialect)
    if not rows:
        return []
    header, out = rows[0], []
    for number, row in enumerate(rows[1:], 2):
        if len(row) != len(header):
            raise CSVError(f"row {number} has {len(row)} fields, the header {len(header)}")
        out.append(dict(zip(header, row, strict=False)))
    return out
