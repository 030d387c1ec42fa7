"""csvlite against the standard library's csv module on thousands of random tables."""

import csv
import io
import random
import unittest

from csvlite import Dialect, read_rows, write_rows

ALPHABET = ['a', 'b', 'z', '0', '7', ' ', ',', '"', '\n', '\r\n', ';', "'", '\t', 'é', '€', 'xyz', '""']


def random_field(rng):
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 8)))


def random_table(rng):
    width = rng.randint(1, 6)
    rows = [[random_field(rng) for _ in range(width)] for _ in range(rng.randint(1, 12))]
    return [row for row in rows if row != [""]] or [["x"]]


def stdlib_write(rows, quoting):
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n", quoting=quoting).writerows(rows)
    return out.getvalue()


def stdlib_read(text):
    return list(csv.reader(io.StringIO(text, newline="")))


class CompatTest(unittest.TestCase):
    def check_tables(self, seed, count, make_text, read):
        rng = random.Random(seed)
        wrong = []
        for _ in range(count):
            rows = random_table(rng)
            text = make_text(rows)
            try:
                got = read(text)
            except ValueError as e:
                got = e
            if got != rows:
                wrong.append((text, got, rows))
        if wrong:
            text, got, rows = min(wrong, key=lambda w: len(w[0]))
            self.fail(f"{len(wrong)} of {count} tables read back wrong; the shortest: {text!r} read as {got!r}, "
                      f"expected {rows!r}")

    def test_reading_what_the_stdlib_writes(self):
        self.check_tables(41, 4000, lambda rows: stdlib_write(rows, csv.QUOTE_MINIMAL), read_rows)

    def test_reading_what_the_stdlib_writes_quoting_everything(self):
        self.check_tables(42, 4000, lambda rows: stdlib_write(rows, csv.QUOTE_ALL), read_rows)

    def test_the_stdlib_reads_what_we_write(self):
        self.check_tables(43, 4000, write_rows, stdlib_read)

    def test_round_trip(self):
        self.check_tables(44, 4000, write_rows, read_rows)

    def test_round_trip_strict(self):
        strict = Dialect(strict=True)
        self.check_tables(45, 4000, lambda rows: write_rows(rows, strict), lambda text: read_rows(text, strict))

    def test_round_trip_with_other_characters(self):
        dialect = Dialect(delimiter=";", quote="'", line_end="\n")
        self.check_tables(46, 4000, lambda rows: write_rows(rows, dialect), lambda text: read_rows(text, dialect))

    def test_a_large_table(self):
        rng = random.Random(47)
        rows = [[random_field(rng) for _ in range(8)] for _ in range(4000)]
        got = read_rows(stdlib_write(rows, csv.QUOTE_MINIMAL))
        self.assertEqual(len(got), len(rows), "rows read from a 4,000-row table")
        wrong = [i for i, (a, b) in enumerate(zip(got, rows, strict=False)) if a != b]
        self.assertFalse(wrong, f"{len(wrong)} rows differ; the first, row {wrong[:1]}: {got[wrong[0]] if wrong else ''!r}")


if __name__ == "__main__":
    unittest.main()
