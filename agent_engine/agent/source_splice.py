"""A Python text parsed with its exact positions, and an edit spliced into it byte for byte.

Mutants (``agent_engine.agent.mutants``) edit a suspect's text at the positions its syntax tree names,
never by ``ast.unparse``: everything outside the edit stays as written (comments, layout, quotes).

Invariants:
- Pure: reads only the string it is given; ``ParsedSource.parsed`` returns None for text that does not
  parse (or nests too deeply), never raises.
- A position is ``(row, column)`` from 0 in the text as given, the column in characters (the tree's
  UTF-8 byte columns converted); an indented text (a method) is parsed under ``if True:`` and its
  positions still count the text's own rows.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["SIMPLE_EXPRESSIONS", "Edit", "ParsedSource", "Position"]

Position = tuple[int, int]  # (row, column) in the text, both from 0, the column in characters
SIMPLE_EXPRESSIONS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant)  # spliced without parentheses


@dataclass(frozen=True)
class Edit:
    """``start``..``end`` of the text replaced by ``new``: a mutant's one edit, its tier and what it does."""

    start: Position
    end: Position
    new: str
    tier: int
    what: str


class ParsedSource:
    """A text, its syntax tree (an indented method parsed under ``if True:``, ``shift`` rows above it),
    its lines and its operator and keyword tokens."""

    def __init__(self, text: str, tree: ast.Module, shift: int) -> None:
        self.text, self.tree, self.shift = text, tree, shift
        self.lines = text.split("\n")
        self.tokens = _tokens(text, shift)

    @classmethod
    def parsed(cls, text: str) -> ParsedSource | None:
        """The text parsed, or None when it does not parse."""
        indented = text[:1].isspace()
        try:
            tree = ast.parse("if True:\n" + text if indented else text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        return cls(text, tree, 1 if indented else 0)

    def start(self, node: ast.AST) -> Position:
        return self._position(node.lineno, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> Position:
        return self._position(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]

    def _position(self, lineno: int, byte_col: int) -> Position:
        row = lineno - 1 - self.shift
        line = self.lines[row] if 0 <= row < len(self.lines) else ""
        return row, len(line.encode()[:byte_col].decode("utf-8", "ignore"))

    def segment(self, start: Position, end: Position) -> str:
        if start[0] == end[0]:
            return self.lines[start[0]][start[1]:end[1]]
        middle = self.lines[start[0] + 1:end[0]]
        return "\n".join([self.lines[start[0]][start[1]:], *middle, self.lines[end[0]][:end[1]]])

    def source(self, node: ast.AST) -> str:
        return self.segment(self.start(node), self.end(node))

    def operator(self, after: Position, before: Position) -> tuple[Position, Position, str] | None:
        """The operator's tokens between two operands (parentheses skipped): their span and text."""
        found = [t for t in self.tokens if after <= t[0] and t[1] <= before and t[2] not in "()"]
        if not found:
            return None
        return found[0][0], found[-1][1], " ".join(t[2] for t in found)

    def spliced(self, start: Position, end: Position, new: str) -> str:
        """The text with ``start``..``end`` replaced by ``new``; every other character as it was."""
        (r0, c0), (r1, c1) = start, end
        head = "\n".join(self.lines[:r0] + [self.lines[r0][:c0]])
        tail = "\n".join([self.lines[r1][c1:]] + self.lines[r1 + 1:])
        return head + new + tail

    def blocks(self) -> Iterator[list[ast.stmt]]:
        """Every statement list inside the text's functions (bodies, branches, handlers)."""
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Module) or (isinstance(node, ast.If) and node.lineno == 1 and not node.orelse
                                                and isinstance(node.test, ast.Constant)):
                continue  # the module, or the ``if True:`` an indented method was parsed under
            for name in ("body", "orelse", "finalbody", "handlers"):
                block = getattr(node, name, None)
                if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                    yield block

    def whole_lines(self, node: ast.stmt) -> tuple[int, int] | None:
        """The rows a statement fills alone (nothing else on them but blanks and a comment), or None."""
        (r0, c0), (r1, c1) = self.start(node), self.end(node)
        after = self.lines[r1][c1:].strip()
        if self.lines[r0][:c0].strip() or after and not after.startswith("#"):
            return None
        return r0, r1

    def in_order(self, block: list[ast.stmt], order: list[int]) -> tuple[Position, Position, str] | None:
        """The span of ``block``'s statements and its text with them in ``order`` (indices into
        ``block``), each moved with the comment and blank lines above it; None when a statement shares
        a line with another."""
        rows = [r for r in (self.whole_lines(s) for s in block) if r is not None]
        if len(rows) != len(block) or not rows:
            return None
        spans = [(rows[i - 1][1] + 1 if i else rows[0][0], rows[i][1]) for i in range(len(rows))]
        chunks = ["\n".join(self.lines[a:b + 1]) for a, b in spans]
        last = spans[-1][1]
        return (spans[0][0], 0), (last, len(self.lines[last])), "\n".join(chunks[i] for i in order)

    def insertions(self, snippet: str, tier: int, what: str, after_row: int = -1) -> Iterator[Edit]:
        """``snippet`` (unindented) inserted before each statement of each block below ``after_row``, and
        after each block's last, never next to a statement that reads the same."""
        for block in self.blocks():
            rows = [r for r in (self.whole_lines(s) for s in block) if r is not None]
            if len(rows) != len(block):
                continue
            indent = self.start(block[0])[1]
            texts = ["\n".join(line[indent:] for line in self.lines[a:b + 1]) for a, b in rows]
            insert = "".join(" " * indent + line + "\n" if line else "\n" for line in snippet.split("\n"))
            for i, (first, _) in enumerate(rows):
                if first > after_row and snippet != texts[i] and (i == 0 or snippet != texts[i - 1]):
                    yield Edit((first, 0), (first, 0), insert, tier, what)
            last = rows[-1][1]
            if last > after_row and snippet != texts[-1]:
                yield Edit((last, len(self.lines[last])), (last, len(self.lines[last])), "\n" + insert[:-1], tier,
                           what)


def _tokens(text: str, shift: int) -> list[tuple[Position, Position, str]]:
    """The operator and keyword tokens of ``text`` with their spans."""
    source = "if True:\n" + text if shift else text
    try:
        found = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, RecursionError):
        return []
    return [((t.start[0] - 1 - shift, t.start[1]), (t.end[0] - 1 - shift, t.end[1]), t.string)
            for t in found if t.type in (tokenize.OP, tokenize.NAME)]
