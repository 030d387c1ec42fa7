"""csvlite: read and write CSV text (RFC 4180 style) with a configurable dialect."""

from csvlite.dialect import EXCEL, TSV, Dialect
from csvlite.reader import CSVError, read_dicts, read_rows
from csvlite.writer import write_dicts, write_rows

__all__ = ["EXCEL", "TSV", "CSVError", "Dialect", "read_dicts", "read_rows", "write_dicts", "write_rows"]
