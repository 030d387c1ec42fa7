"""The undo of the last edit: part of the tool program that runs INSIDE the sandbox.

``agent_engine.agent.aci.tool_program`` runs this source first, then ``text_match``'s, ``file_view``'s,
``file_tool``'s, ``failing_code``'s and the rest up to ``repo_tool``'s, in one namespace.
``file_tool.written`` calls ``save_undo`` before it writes a file; the ``undo`` op (``repo_tool.main``) calls ``undo_last_edit``, which the agent
loop asks for when an edit made the task's check worse (``agent_engine.agent.checked_edits``). It
needs nothing but the standard library.

Invariants:
- One record, in the sandbox's temporary folder (``$TMPDIR``, outside the repository): the last
  written file's path (resolved) and its text before that write. Each write replaces it; an undo
  consumes it once the file is written back (a process cut while writing leaves it for the next
  undo), so an edit is undone at most once.
- ``undo_last_edit`` writes only a regular file inside the working folder (the repository) that is
  still writable, and only when the record is whole; otherwise it changes nothing and says why
  (exit status 1).
"""

from __future__ import annotations

import json
import os
import tempfile

UNDO_NAME = "agent-edit-undo.json"


def undo_record_path() -> str:
    """Where the record of the last edit is kept."""
    return os.path.join(tempfile.gettempdir(), UNDO_NAME)


def save_undo(path: str, before: str) -> None:
    """Remember ``path``'s text ``before`` the write about to happen (best effort: an undo record that
    cannot be written only means the edit cannot be undone)."""
    try:
        with open(undo_record_path(), "w", encoding="utf-8") as f:
            json.dump({"path": os.path.realpath(path), "text": before}, f)
    except OSError:
        pass


def undo_last_edit() -> int:
    """Put the last edited file back as it was before that edit; prints what happened."""
    record_path = undo_record_path()
    try:
        with open(record_path, encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, ValueError):
        print("There is no edit to undo.")
        return 1
    path, text = (record.get("path"), record.get("text")) if isinstance(record, dict) else (None, None)
    root = os.path.realpath(".")
    if not isinstance(path, str) or not isinstance(text, str) or not path.startswith(root + os.sep):
        _forget(record_path)
        print("The undo record is not usable: nothing changed.")
        return 1
    if not os.path.isfile(path) or os.path.islink(path) or not os.access(path, os.W_OK):
        _forget(record_path)
        print(f"{os.path.relpath(path, root)} can no longer be written: nothing changed.")
        return 1
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    _forget(record_path)  # only now: a process cut while writing leaves the record for the next undo
    print(f"{os.path.relpath(path, root)} is back as it was before the edit.")
    return 0


def _forget(record_path: str) -> None:
    """Remove the undo record (one undo per edit)."""
    try:
        os.unlink(record_path)
    except OSError:
        pass
