"""How a CSV text is written: the delimiter, the quote character and the line ending."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Dialect:
    delimiter: str = ","
    quote: str = '"'
    line_end: str = "\r\n"
    strict: bool = False  # strict: text after a closing quote is an error

    def __post_init__(self):
        if len(self.delimiter) != 1 or len(self.quote) != 1:
            raise ValueError("delimiter and quote must be single characters")
        if self.delimiter == self.quote:
            raise ValueError("delimiter and quote must differ")


EXCEL = Dialect()
TSV = Dialect(delimiter="\t")
