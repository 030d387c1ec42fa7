"""Import agent logs as they come (our trace JSONL, OpenAI-style or Anthropic-style message logs) into
a valid trace: ``import_logs(paths) -> ImportResult``.

Per file, the lines are read (``records``) and each line is classified: a trace job (``ours``), an
Anthropic-style call (``anthropic``) or an OpenAI-style call (``openai``), tried in that order. A
file's shape is that of its first classified line; a file with no classifiable line is an error
(``ValueError`` naming the file). A line of no known shape, or one its reader rejects, is dropped and
reported with its ``file:line``. Message-log calls of all files are grouped into jobs together
(``grouping``), then every job is repaired and checked (``repair``). Keys read and repairs made:
docs/traces.md and the modules' docstrings.

Invariants: every output job passes ``validate_job``; job ids are unique; output jobs come in the
order of their first line (files in the order given); nothing in a file's content raises.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent_engine.json_types import JsonObject
from agent_engine.workloads.traces.format import TraceJob
from agent_engine.workloads.traces.importers import anthropic, openai, ours
from agent_engine.workloads.traces.importers.calls import Call
from agent_engine.workloads.traces.importers.grouping import group_calls
from agent_engine.workloads.traces.importers.log_lines import read_records
from agent_engine.workloads.traces.importers.raw import RawJob
from agent_engine.workloads.traces.importers.repair import repair
from agent_engine.workloads.traces.importers.report import ImportReport, LineError, Place

__all__ = ["SHAPES", "ImportReport", "ImportResult", "Place", "classify", "import_logs"]

SHAPES: tuple[tuple[str, Callable[[JsonObject], bool]], ...] = (
    (ours.SHAPE, ours.matches), (anthropic.SHAPE, anthropic.matches), (openai.SHAPE, openai.matches),
)


@dataclass
class ImportResult:
    """The imported jobs (valid, in input order) and the report of what was read, repaired and dropped."""

    jobs: list[TraceJob]
    report: ImportReport


def classify(obj: JsonObject) -> str | None:
    """The shape of one line (``trace``, ``anthropic``, ``openai``) or ``None``."""
    return next((name for name, matches in SHAPES if matches(obj)), None)


def _read_file(path: Path, report: ImportReport, raw_jobs: list[RawJob], calls: list[Call]) -> None:
    label = str(path)
    shape, first_keys = None, None
    for place, obj in read_records(path, label, report):
        line_shape = classify(obj)
        shape = shape or line_shape
        first_keys = first_keys or (place.line, sorted(obj)[:8])
        try:
            if line_shape is None:
                raise LineError("unknown shape (not a trace job, OpenAI-style or Anthropic-style call)")
            if line_shape == ours.SHAPE:
                raw_jobs.append(ours.parse(place, obj, report))
            else:
                calls.append((anthropic if line_shape == anthropic.SHAPE else openai).parse(place, obj))
        except LineError as e:
            report.drop(place, str(e))
    if shape is None:
        what = "no line is a JSON object" if first_keys is None else \
            f"keys of line {first_keys[0]}: {', '.join(first_keys[1])}"
        raise ValueError(f"{label}: unknown log shape (not a trace, OpenAI-style or Anthropic-style log; {what})")
    report.files.append(label)
    report.shapes[label] = shape


def _count_output(jobs: list[TraceJob], report: ImportReport) -> None:
    turns = [t for j in jobs for t in j.turns]
    report.jobs_kept = len(jobs)
    report.turns_kept = len(turns)
    report.tool_times_imputed = sum(1 for t in turns if t.extra.get("tool_seconds_imputed"))
    report.tokens_estimated = sum(1 for t in turns if t.extra.get("tokens_estimated"))


def import_logs(paths: Sequence[str | os.PathLike[str]]) -> ImportResult:
    """Read, group and repair the logs at ``paths`` (see the module docstring).

    Raises ``ValueError`` naming the file for a missing or unreadable file or one of unknown shape.
    """
    if not paths:
        raise ValueError("no log files given")
    report = ImportReport()
    raw_jobs: list[RawJob] = []
    calls: list[Call] = []
    for p in paths:
        _read_file(Path(p), report, raw_jobs, calls)
    raw_jobs += group_calls(calls, report)
    order = {f: i for i, f in enumerate(report.files)}
    raw_jobs.sort(key=lambda j: (order[j.place.file], j.place.line))
    jobs = repair(raw_jobs, report)
    _count_output(jobs, report)
    return ImportResult(jobs, report)

