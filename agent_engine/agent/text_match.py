"""Where a model's ``old_text`` stands in a file: the matching half of ``edit_file``, run INSIDE the sandbox.

``agent_engine.agent.aci.tool_program`` runs this source after ``edit_undo``'s, then ``file_view``'s,
``file_tool``'s and the rest up to ``repo_tool``'s, in one namespace; on the host, ``file_tool`` imports
it. Importing it runs nothing; it needs nothing but the standard library.

Invariants:
- ``locate`` finds the one place ``old`` occupies: verbatim, else line by line with leading and
  trailing blanks ignored (with the first matched line's indentation), each tried again without line
  numbers when every line of ``old`` carries a ``view``-style number (``variants``); none when it
  occurs zero or several times (``occurrences`` then gives the line numbers).
- ``gapped_edit`` applies an edit whose ``old`` left out up to ``MAX_GAP`` lines between two of its
  lines, only when that reading is certain: one place, each line equal but for blanks, a changed run
  adjacent in the file.
- ``aligned_rewrite`` reads a range replacement whose new lines each rewrite one of the range's lines
  (similar text, in order) as rewriting those lines only; the caller uses it only where the literal
  replacement would break the file.
- ``closest`` is the ``difflib`` closest window of the file's lines, bounded by ``MAX_WINDOWS``
  windows compared on their first ``PROBE_LINES`` lines cut to ``LINE_CHARS`` characters.
"""

from __future__ import annotations

import difflib
import re

LINE_CHARS = 160  # characters per shown line, at most
MIN_SIMILARITY = 0.5  # below this, no window is offered as "what you meant"
MAX_WINDOWS = 5000  # windows compared by difflib, at most (the file's first lines)
PROBE_LINES = 3  # a window is compared on its first lines only
ALIGN_SIMILARITY = 0.6  # a rewritten line this similar to an old one is taken as its rewrite (aligned_rewrite)
NEARBY_MARGIN = 0.1  # nearby_rewrite's best line must be this much more similar than the next best
MAX_GAP = 3  # lines the model may have left out between two lines of old_text (gapped_edit)
NUMBERED = re.compile(r"^ *[0-9]+[|] ?")


def variants(old: str) -> list[str]:
    """``old`` as given and, when every line carries a ``view``-style number, without the numbers."""
    lines = old.strip("\n").splitlines()
    out = [old]
    if lines and all(NUMBERED.match(x) for x in lines):
        out.append("\n".join(NUMBERED.sub("", x, count=1) for x in lines))
    return out


def locate(text: str, old: str) -> tuple[int | None, int, str | None]:
    """``(start, end, indent)`` of the one place ``old`` (or its unnumbered variant) occupies in
    ``text``; ``(None, count, None)`` when it occurs ``count`` times (0 or several)."""
    found: tuple[int | None, int, str | None] = (None, 0, None)
    for candidate in variants(old):
        found = locate_as_given(text, candidate)
        if found[0] is not None:
            return found
    return found


def locate_as_given(text: str, old: str) -> tuple[int | None, int, str | None]:
    if text.count(old) == 1:
        i = text.index(old)
        return i, i + len(old), None
    hits = stripped_hits(text, old)
    if len(hits) != 1:
        return None, text.count(old) or len(hits), None
    lines = text.splitlines(keepends=True)
    k, n = hits[0], len(old.strip("\n").splitlines())
    start = sum(len(x) for x in lines[:k])
    end = start + sum(len(x) for x in lines[k:k + n])
    indent = lines[k][: len(lines[k]) - len(lines[k].lstrip())]
    return start, end, indent


def stripped_hits(text: str, old: str) -> list[int]:
    """The 0-based first lines of every run of lines equal to ``old``'s lines, blanks at both ends ignored."""
    lines, want = text.splitlines(), [w.strip() for w in old.strip("\n").splitlines()]
    return [k for k in range(len(lines) - len(want) + 1)
            if want and [x.strip() for x in lines[k:k + len(want)]] == want]


def occurrences(text: str, old: str) -> list[int]:
    """The 1-based line numbers where ``old`` starts (verbatim, else line by line ignoring blanks)."""
    for candidate in variants(old):
        if text.count(candidate) > 1:
            return [text.count("\n", 0, m.start()) + 1 for m in re.finditer(re.escape(candidate), text)]
        hits = stripped_hits(text, candidate)
        if len(hits) > 1:
            return [k + 1 for k in hits]
    return []


def whitespace_match(text: str, old: str) -> tuple[int, int] | None:
    """The 1-based first and last lines of the one place where ``text`` equals ``old`` once all
    whitespace is ignored (``\\n`` and ``\\t`` typed as two characters count as whitespace too);
    None when there is no such place or several."""
    for candidate in variants(old):
        target = "".join(candidate.replace("\\n", "\n").replace("\\t", "\t").split())
        if not target:
            continue
        chars, line_of = [], []
        for no, line in enumerate(text.splitlines(), 1):
            for c in line:
                if not c.isspace():
                    chars.append(c)
                    line_of.append(no)
        flat = "".join(chars)
        if flat.count(target) == 1:
            i = flat.index(target)
            return line_of[i], line_of[i + len(target) - 1]
    return None


def closest(text: str, old: str) -> tuple[float, int, int]:
    """``(similarity, first, last)``: the 1-based window of the file's lines, as many as ``old`` has,
    whose first ``PROBE_LINES`` lines are most similar to ``old``'s (``difflib`` ratio of the lines with
    their blanks stripped, each cut to ``LINE_CHARS``): the work is bounded by ``MAX_WINDOWS`` windows
    of ``PROBE_LINES`` short lines, whatever the sizes of the file and of ``old``."""
    lines = text.splitlines()
    candidate = variants(old)[-1]
    want = [w.strip()[:LINE_CHARS] for w in candidate.strip("\n").splitlines()] or [candidate.strip()[:LINE_CHARS]]
    n, probe = len(want), want[:PROBE_LINES]
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2("\n".join(probe))  # the constant side: difflib caches its index
    best, best_k = 0.0, 0
    for k in range(min(max(1, len(lines) - len(probe) + 1), MAX_WINDOWS)):
        matcher.set_seq1("\n".join(x.strip()[:LINE_CHARS] for x in lines[k:k + len(probe)]))
        if matcher.real_quick_ratio() <= best or matcher.quick_ratio() <= best:
            continue
        ratio = matcher.ratio()
        if ratio > best:
            best, best_k = ratio, k
    return best, best_k + 1, min(len(lines), best_k + n)


def indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def aligned_rewrite(old_lines: list[str], new_lines: list[str]) -> list[tuple[int, str]] | None:
    """Where a range replacement that names too many lines meant to land: each non-blank line of
    ``new_lines``, in order, paired with a distinct later line of ``old_lines`` it rewrites (stripped
    text at least ``ALIGN_SIMILARITY`` similar) and re-indented to it; None unless every non-blank new
    line pairs, fewer lines pair than ``old_lines`` holds, and at least one paired line changes.
    (A small model asked to fix line 6 often replaces the whole window 4-9 it viewed by line 6 alone.)"""
    wanted = [x for x in new_lines if x.strip()]
    if not wanted or len(wanted) >= len([x for x in old_lines if x.strip()]):
        return None
    pairs: list[tuple[int, str]] = []
    at = 0
    for line in wanted:
        scores = [(difflib.SequenceMatcher(None, old_lines[k].strip(), line.strip()).ratio(), k)
                  for k in range(at, len(old_lines)) if old_lines[k].strip()]
        best = max(scores, default=(0.0, -1))
        if best[0] < ALIGN_SIMILARITY:
            return None
        k = best[1]
        indent = indent_of(old_lines[k]) if len(indent_of(line)) < len(indent_of(old_lines[k])) else ""
        pairs.append((k, indent + line))
        at = k + 1
    if all(old_lines[k].rstrip("\r\n") == text for k, text in pairs):
        return None
    return pairs


def nearby_rewrite(window: list[str], new_lines: list[str]) -> list[tuple[int, str]] | None:
    """The one line of ``window`` that a one-line ``new_lines`` rewrites (a small model asked to fix
    line 6 that names line 4), re-indented to it: the most similar line, at least ``ALIGN_SIMILARITY``
    similar (stripped), more so by ``NEARBY_MARGIN`` than any other and not equal to it; else None."""
    wanted = [x for x in new_lines if x.strip()]
    if len(wanted) != 1:
        return None
    line = wanted[0]
    scores = sorted(((difflib.SequenceMatcher(None, old.strip(), line.strip()).ratio(), k)
                     for k, old in enumerate(window) if old.strip()), reverse=True)
    if not scores or scores[0][0] < ALIGN_SIMILARITY or window[scores[0][1]].strip() == line.strip():
        return None
    if len(scores) > 1 and scores[1][0] > scores[0][0] - NEARBY_MARGIN:
        return None
    k = scores[0][1]
    indent = indent_of(window[k]) if len(indent_of(line)) < len(indent_of(window[k])) else ""
    return [(k, indent + line.lstrip() if indent else line)]


def gapped_places(lines: list[str], want: list[str]) -> list[list[int]]:
    """Every list of 0-based line indexes where ``want`` (stripped lines) occurs in order, each next
    line at most ``MAX_GAP`` lines after the previous one (the first such line taken each time)."""
    places = []
    for k in range(min(len(lines), MAX_WINDOWS)):
        if lines[k].strip() != want[0]:
            continue
        idx = [k]
        for w in want[1:]:
            j = idx[-1] + 1
            while j < len(lines) and j - idx[-1] <= MAX_GAP + 1 and lines[j].strip() != w:
                j += 1
            if j >= len(lines) or j - idx[-1] > MAX_GAP + 1:
                break
            idx.append(j)
        if len(idx) == len(want):
            places.append(idx)
    return places


def gapped_edit(text: str, old: str, new: str) -> tuple[str, int, int] | None:
    """``(new text, first, last)`` (0-based lines of the result around the change) of ``old`` -> ``new``
    applied as a line diff where ``old``'s non-blank lines occur once with gaps (see the module
    docstring), else None."""
    lines = text.splitlines(keepends=True)
    old_lines = [x for x in variants(old)[-1].strip("\n").splitlines() if x.strip()]
    new_lines = new.strip("\n").splitlines()
    want = [x.strip() for x in old_lines]
    if len(want) < 2:
        return None
    places = gapped_places(lines, want)
    if len(places) != 1:
        return None
    idx = places[0]
    shift = (indent_of(old_lines[0]), indent_of(lines[idx[0]]))

    def reindent(line: str) -> str:
        body = line[len(shift[0]):] if line.startswith(shift[0]) else line.lstrip()
        return (shift[1] + body if line.strip() else "") + "\n"

    out = list(lines)
    ops = difflib.SequenceMatcher(None, want, [x.strip() for x in new_lines], autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in reversed(ops):  # from the end, so earlier indexes stay valid
        if tag == "equal":
            continue
        replacement = [reindent(x) for x in new_lines[j1:j2]]
        if i1 == i2:  # an insertion after old line i1 - 1 (before old line 0 when i1 is 0)
            at = idx[i1 - 1] + 1 if i1 > 0 else idx[0]
            out[at:at] = replacement
            continue
        span = idx[i1:i2]
        if span != list(range(span[0], span[-1] + 1)):
            return None  # the lines to change are not adjacent in the file: too uncertain
        out[span[0]:span[-1] + 1] = replacement
    added = len(out) - len(lines)
    return "".join(out), idx[0], idx[-1] + max(0, added)
