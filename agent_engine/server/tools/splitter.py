"""Cut a model's output into text and tool-call blocks, the same way whether it arrives whole or in pieces.

A family's ``Markers`` say where a call block opens (``anywhere`` in the text, or only ``at_start``:
as the first non-blank text of the output) and where it closes (after ``end``, or at the end of the
output when ``end`` is None; an unclosed block also runs to the end).

Invariants (the streaming parser relies on them):
- ``Splitter.next(buf, final)`` returns a segment only when no continuation of ``buf`` could change
  it, so cutting an output anywhere and feeding the pieces gives the same segments as feeding it
  whole, joined text pieces aside (text may come in several pieces).
- With ``final`` it always returns a segment for a non-empty ``buf``; every segment is non-empty.
- Text that might be the beginning of a marker is held back until it is known not to be one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SegmentKind = Literal["text", "block"]
Segment = tuple[SegmentKind, int]


@dataclass(frozen=True)
class Markers:
    """Where a family's call blocks open and close."""

    anywhere: tuple[str, ...] = ()
    at_start: tuple[str, ...] = ()
    end: str | None = None


class Splitter:
    """The segmenter of one output (stateful: it knows whether non-blank text was seen yet)."""

    def __init__(self, markers: Markers) -> None:
        self.markers = markers
        self._at_start = bool(markers.at_start)

    def next(self, buf: str, final: bool) -> Segment | None:
        """The next segment at the start of ``buf`` (its kind and length), or None: wait for more."""
        if self._at_start:
            blank = len(buf) - len(buf.lstrip())
            if blank:
                return "text", blank
            decided = self._opening(buf, final)
            if decided is not False:
                return decided
            self._at_start = False
        return self._anywhere(buf, final)

    def _opening(self, buf: str, final: bool) -> Segment | None | Literal[False]:
        """At the first non-blank character: a block, None (undecided) or False (plain text)."""
        starts = self.markers.at_start + self.markers.anywhere
        for marker in starts:
            if buf.startswith(marker):
                seg = self._block(buf, marker, final)
                self._at_start = seg is None  # decided once the block is
                return seg
        if not final and any(m.startswith(buf) for m in starts):
            return None
        return False

    def _anywhere(self, buf: str, final: bool) -> Segment | None:
        found = [(i, m) for m in self.markers.anywhere if (i := buf.find(m)) >= 0]
        if found:
            i, marker = min(found)
            return ("text", i) if i > 0 else self._block(buf, marker, final)
        if final:
            return "text", len(buf)
        keep = len(buf) - _partial_marker(buf, self.markers.anywhere)
        return ("text", keep) if keep > 0 else None

    def _block(self, buf: str, marker: str, final: bool) -> Segment | None:
        end = self.markers.end
        if end is not None:
            j = buf.find(end, len(marker))
            if j >= 0:
                return "block", j + len(end)
        return ("block", len(buf)) if final else None


def _partial_marker(buf: str, markers: tuple[str, ...]) -> int:
    """The length of the longest end of ``buf`` that is a proper beginning of a marker."""
    best = 0
    for marker in markers:
        for k in range(min(len(marker) - 1, len(buf)), best, -1):
            if buf.endswith(marker[:k]):
                best = k
                break
    return best
