"""Bounded capture of a command's output: the first and last bytes are kept, the middle is counted and dropped.

Invariants:
- ``OutputCapture`` holds at most ``head_bytes + tail_bytes + one fed chunk`` bytes, whatever the
  command writes (``yes`` costs bounded memory); ``total_bytes`` counts every byte fed.
- ``OutputCapture.text(max_chars)`` is at most ``max_chars`` characters: the whole output (decoded as
  UTF-8, invalid bytes replaced) when it fits, else its head and tail around a marker stating how many
  characters were left out. Characters of a dropped middle are counted as UTF-8 lead bytes (exact for
  valid UTF-8). Built with ``head_bytes, tail_bytes >= 4 * max_chars + 4`` the kept head and tail
  always hold enough characters to fill ``max_chars``.
- ``truncate_output(text, n)`` is the same cut for a text already in memory.
"""

from __future__ import annotations

__all__ = ["OutputCapture", "truncate_output"]

_CONTINUATION = bytes(range(0x80, 0xC0))  # UTF-8 continuation bytes: not the start of a character


def _marker(elided: int) -> str:
    return f"\n... [{elided} characters elided] ...\n"


def _utf8_chars(data: bytes) -> int:
    return len(data.translate(None, _CONTINUATION))


def _elide(head: str, middle: int, tail: str, max_chars: int) -> tuple[str, bool]:
    """``head`` + (``middle`` unseen characters) + ``tail`` cut to at most ``max_chars`` characters."""
    total = len(head) + middle + len(tail)
    if middle == 0 and total <= max_chars:
        return head + tail, False
    # Size the marker for the largest possible count (total); the real count has no more digits,
    # so head + marker + tail never exceeds max_chars.
    room = max_chars - len(_marker(total))
    if room < 2:
        return (head + tail)[:max_chars], True
    h = min(room // 2, len(head))
    t = min(room - h, len(tail))
    kept_tail = tail[len(tail) - t:] if t else ""
    return head[:h] + _marker(total - h - t) + kept_tail, True


def truncate_output(text: str, max_chars: int) -> tuple[str, bool]:
    """``text`` cut to at most ``max_chars`` characters (head + marker + tail); returns (text, truncated)."""
    if len(text) <= max_chars:
        return text, False
    half = len(text) // 2
    return _elide(text[:half], 0, text[half:], max_chars)


class OutputCapture:
    """Keeps the first ``head_bytes`` and the last ``tail_bytes`` of a byte stream (see the module docstring)."""

    def __init__(self, head_bytes: int, tail_bytes: int) -> None:
        if head_bytes < 1 or tail_bytes < 1:
            raise ValueError("head_bytes and tail_bytes must be >= 1")
        self._head_cap, self._tail_cap = head_bytes, tail_bytes
        self._head, self._tail = bytearray(), bytearray()
        self.total_bytes = 0
        self.dropped_bytes = 0
        self._dropped_chars = 0

    @classmethod
    def for_chars(cls, max_chars: int) -> OutputCapture:
        """A capture that keeps enough bytes to fill ``max_chars`` characters from either end."""
        return cls(4 * max_chars + 4, 4 * max_chars + 4)

    def feed(self, data: bytes) -> None:
        """Add the next bytes of the stream."""
        self.total_bytes += len(data)
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if not data:
            return
        self._tail += data
        excess = len(self._tail) - self._tail_cap
        if excess > 0:
            self._dropped_chars += _utf8_chars(bytes(self._tail[:excess]))
            self.dropped_bytes += excess
            del self._tail[:excess]

    def text(self, max_chars: int) -> tuple[str, bool]:
        """The output cut to at most ``max_chars`` characters; returns (text, truncated)."""
        if not self.dropped_bytes:
            return truncate_output(bytes(self._head + self._tail).decode("utf-8", errors="replace"), max_chars)
        tail = bytes(self._tail)
        skip = 0
        while skip < min(3, len(tail)) and 0x80 <= tail[skip] < 0xC0:  # a character cut in two
            skip += 1
        tail = tail[skip:]
        head_text = bytes(self._head).decode("utf-8", errors="replace")
        return _elide(head_text, self._dropped_chars, tail.decode("utf-8", errors="replace"), max_chars)
