"""The program behind ``view_file`` and ``edit_file``: it runs INSIDE the sandbox, as ``python3 -I -c SOURCE ARG``.

``agent_engine.agent.aci`` sends this file's source to the sandbox's ``python3`` with one argument,
base64 JSON ``{"op": "view" | "edit", "path", "old", "new"}``; what it prints is the observation, its
exit status the tool's. Importing it runs nothing; it needs nothing but the standard library.

Invariants:
- ``view`` prints the file with line numbers (its first ``VIEW_LINES`` lines), a folder's files, or,
  when the path does not exist, the files of its nearest existing folder (at most ``MAX_LISTED``) and
  the closest paths in the tree (``difflib``).
- ``edit`` writes the file only when ``old`` occurs exactly once: verbatim, else line by line with
  leading and trailing blanks ignored (``new`` is then re-indented to the first matched line's
  indentation), each tried again without line numbers when every line of ``old`` carries a
  ``view``-style number. Otherwise nothing is written and the observation says why and what the model
  probably meant: the line numbers of each occurrence (``old`` occurs several times), or the lines
  that equal ``old`` but for whitespace, or the ``difflib`` closest window of the file's lines (when
  at least ``MIN_SIMILARITY`` similar). Every failure observation is bounded (``SHOW_LINES`` lines of
  at most ``LINE_CHARS`` characters), and so is the search, whatever the sizes of the file and ``old``.
- When ``old`` is not found so, but its non-blank lines occur in the file in order, each equal but for
  surrounding blanks, at most ``MAX_GAP`` lines apart and in exactly one place (the model left out a
  docstring or a comment between them), the edit is applied as the line diff from ``old`` to ``new``
  on the lines ``old`` names (``gapped_edit``): a changed run of ``old``'s lines must be adjacent in
  the file, the lines ``old`` left out stay, and the observation says the match was not exact and
  shows the result. Anything less certain writes nothing.
- A file that cannot be written (read-only, as the task's check files are) is left as it was, and the
  observation says so.
"""

from __future__ import annotations

import base64
import difflib
import json
import os
import re
import sys

VIEW_LINES = 400
SHOW_LINES = 12  # lines shown after a failed edit, at most
LINE_CHARS = 160  # characters per shown line, at most
CONTEXT = 1  # lines shown around the closest window
MAX_LISTED = 40  # files named when a path does not exist, at most
MIN_SIMILARITY = 0.5  # below this, no window is offered as "what you meant"
MAX_WINDOWS = 5000  # windows compared by difflib, at most (the file's first lines)
PROBE_LINES = 3  # a window is compared on its first lines only
MAX_GAP = 3  # lines the model may have left out between two lines of old_text (gapped_edit)
NUMBERED = re.compile(r"^ *[0-9]+[|] ?")


def numbered(lines: list[str], start: int = 1) -> str:
    """``lines`` (with their line ends) as ``view`` shows them: a right-aligned number and ``| ``."""
    return "".join(f"{n:4d}| {line}" for n, line in enumerate(lines, start))


def shown(lines: list[str], first: int) -> str:
    """At most ``SHOW_LINES`` of ``lines`` (without line ends), numbered from ``first``, each cut to
    ``LINE_CHARS`` characters, one per line."""
    out = []
    for n, line in enumerate(lines[:SHOW_LINES], first):
        cut = line if len(line) <= LINE_CHARS else line[:LINE_CHARS - 3] + "..."
        out.append(f"{n:4d}| {cut}\n")
    if len(lines) > SHOW_LINES:
        out.append(f"      ... ({len(lines) - SHOW_LINES} more lines)\n")
    return "".join(out)


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


def not_found(path: str, text: str, old: str) -> str:
    """Why ``old`` could not be placed in ``text``, and what the model probably meant (bounded)."""
    lines = text.splitlines()
    if not old.strip():
        return f"old_text was not found in {path}: it is blank. Give the exact lines to replace. Nothing changed.\n"
    where = occurrences(text, old)
    if where:
        at = ", ".join(str(n) for n in where[:10]) + (" ..." if len(where) > 10 else "")
        return (f"old_text occurs {len(where)} times in {path} (at lines {at}). Nothing changed. Give more "
                "lines around the one to change, so that old_text occurs once.\n")
    head = f"old_text was not found in {path}. Nothing changed.\n"
    match = whitespace_match(text, old)
    if match is not None:
        first, last = match
        return (head + f"Lines {first}-{last} of {path} match old_text except for whitespace (spaces, tabs, "
                "blank lines or line breaks). Copy old_text from them exactly as shown here:\n"
                + shown(lines[first - 1:last], first))
    if not lines:
        return head + f"{path} is empty.\n"
    similarity, first, last = closest(text, old)
    if similarity < MIN_SIMILARITY:
        return head + f"No lines of {path} resemble old_text: is it the right file? view_file shows it.\n"
    lo, hi = max(1, first - CONTEXT), min(len(lines), last + CONTEXT)
    return (head + f"The closest lines of {path} are {first}-{last} ({similarity:.0%} similar); they read:\n"
            + shown(lines[lo - 1:hi], lo)
            + "If these are the lines to change, copy old_text from them exactly.\n")


def edit(path: str, text: str, old: str, new: str) -> int:
    """Replace ``old`` by ``new`` in the file (see the module docstring); prints the observation."""
    start, end, indent = locate(text, old) if old.strip() else (None, 0, None)
    if start is None:
        gapped = gapped_edit(text, old, new) if old.strip() else None
        if gapped is None:
            print(not_found(path, text, old), end="")
            return 1
        return write_gapped(path, *gapped)
    if indent is not None:
        body = new.strip("\n").splitlines()
        base = min((len(x) - len(x.lstrip()) for x in body if x.strip()), default=0)
        new = "".join(indent + x[base:] + "\n" if x.strip() else "\n" for x in body)
    text = text[:start] + new + text[end:]
    if not written(path, text):
        return 1
    lines = text.splitlines(keepends=True)
    first = text[:start].count("\n")
    last = first + max(1, new.count("\n") + (0 if new.endswith("\n") else 1))
    lo = max(0, first - 2)
    print(f"Edited {path}. Lines {lo + 1}-{min(len(lines), last + 2)} now read:")
    print(numbered(lines[lo:last + 2], lo + 1), end="")
    return 0


def written(path: str, text: str) -> bool:
    """Write ``text`` to ``path``; False (after saying so) when the file is read-only."""
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except PermissionError:
        print(f"{path} is read-only: nothing changed. A task's check files are read-only: fix the code they "
              "test instead.")
        return False
    return True


def write_gapped(path: str, text: str, first: int, last: int) -> int:
    """Write a ``gapped_edit`` result; prints what changed (or that the file is read-only)."""
    if not written(path, text):
        return 1
    lines = text.splitlines(keepends=True)
    lo, hi = max(0, first - 1), min(len(lines), last + 2)
    print(f"Edited {path}. old_text did not match exactly (the file has lines between the ones it gave, "
          f"which were kept); the change was applied to the lines it named. Lines {lo + 1}-{hi} now read:")
    print(numbered(lines[lo:hi], lo + 1), end="")
    return 0


def tree_files(root: str, limit: int = MAX_LISTED) -> list[str]:
    """Up to ``limit`` files under ``root`` (hidden and ``__pycache__`` entries skipped), sorted."""
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        found += [os.path.normpath(os.path.join(folder, f)) for f in sorted(files) if not f.startswith(".")]
        if len(found) >= limit:
            break
    return sorted(found)[:limit]


def missing(path: str) -> str:
    """The observation for a path that is not a file: the files of its nearest existing folder and the
    paths in the tree most like it (what the model probably meant)."""
    folder = os.path.dirname(os.path.normpath(path))
    while folder and not os.path.isdir(folder):
        folder = os.path.dirname(folder)
    listed = tree_files(folder or ".")
    lines = [f"No file {path!r}. Nothing changed."]
    like = difflib.get_close_matches(os.path.normpath(path), tree_files("."), n=3, cutoff=0.5)
    if like:
        lines.append("Did you mean: " + ", ".join(like) + "?")
    lines.append(f"Files in {folder or '.'}: " + ", ".join(listed) + ("" if len(listed) < MAX_LISTED else ", ..."))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Run one ``view`` or ``edit`` (argv[1]: base64 JSON); returns the exit status."""
    a = json.loads(base64.b64decode(argv[1]))
    path = a["path"]
    if os.path.isdir(path) and a["op"] != "view":
        print(f"{path} is a folder, not a file. Nothing changed.")
        return 1
    if os.path.isdir(path):
        names = sorted(os.path.join(r, f)[len(path):].lstrip("/") for r, _, fs in os.walk(path) for f in fs)
        print(f"{path} holds: " + ", ".join(n for n in names if "__pycache__" not in n))
        return 0
    if not os.path.isfile(path):
        print(missing(path))
        return 1
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if a["op"] == "view":
        print(numbered(text.splitlines(keepends=True)[:VIEW_LINES]), end="")
        return 0
    return edit(path, text, a["old"], a["new"])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
