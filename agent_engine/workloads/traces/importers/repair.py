"""Turn read jobs into valid trace jobs; every repair is counted and noted, never silent.

Steps, in order:
1. clamp: a negative tool time (clock skew) becomes 0 (counted, noted);
2. fit: the median of the known tool times per tool name over the whole import, and over all tools;
3. split: a turn whose prompt is shorter than the previous prompt plus output (a compacted context)
   starts a new segment, written as its own job ``<id>#seg<k>`` with ``segment_of: <id>`` and
   ``segment: k`` (the first part keeps ``<id>`` and gets ``segments: n``). A segment's last turn has
   no tool time (the format requires ``null``); the measured gap to the next segment is kept on it as
   ``tool_seconds_to_next_segment``;
4. impute: an unknown tool time before a segment's last turn becomes the median of its tool (the
   all-tools median if the tool has no known time, ``DEFAULT_TOOL_SECONDS`` if nothing is known),
   flagged ``tool_seconds_imputed: true``;
5. check: every job passes ``validate_job`` (a job that does not is dropped with the reason) and job
   ids are unique (a later duplicate is dropped).
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from agent_engine.workloads.traces.format import TraceJob, TraceTurn, validate_job
from agent_engine.workloads.traces.importers.raw import RawJob
from agent_engine.workloads.traces.importers.report import ImportReport, Place

__all__ = ["DEFAULT_TOOL_SECONDS", "repair"]

DEFAULT_TOOL_SECONDS = 1.0


def _clamp(jobs: list[RawJob], report: ImportReport) -> None:
    for job in jobs:
        for i, (t, place) in enumerate(zip(job.turns, job.places, strict=True)):
            if t.tool_seconds is not None and t.tool_seconds < 0:
                report.tool_times_clamped += 1
                report.note(place, f"job {job.job_id} turn {i}: negative tool time {t.tool_seconds:.3f} s "
                            "clamped at 0")
                t.tool_seconds = 0.0


def _medians(jobs: list[RawJob]) -> tuple[dict[str | None, float], float]:
    known: dict[str | None, list[float]] = defaultdict(list)
    for job in jobs:
        for t in job.turns[:-1]:
            if t.tool_seconds is not None:
                known[t.tool_name].append(float(t.tool_seconds))
    every = [s for times in known.values() for s in times]
    overall = statistics.median(every) if every else DEFAULT_TOOL_SECONDS
    return {name: statistics.median(times) for name, times in known.items()}, overall


def _split(job: RawJob, report: ImportReport) -> list[tuple[TraceJob, list[Place]]]:
    starts = [0] + [i for i in range(1, len(job.turns)) if job.turns[i].prompt_tokens
                    < job.turns[i - 1].prompt_tokens + job.turns[i - 1].output_tokens]
    if len(starts) == 1:
        return [(TraceJob(job.job_id, job.turns, dict(job.meta)), job.places)]
    out = []
    for k, (a, b) in enumerate(zip(starts, [*starts[1:], len(job.turns)], strict=True)):
        turns, last = job.turns[a:b], job.turns[b - 1]
        if b < len(job.turns):
            if last.tool_seconds is not None:
                last.extra["tool_seconds_to_next_segment"] = last.tool_seconds
            last.tool_seconds = None
        if k == 0:
            out.append((TraceJob(job.job_id, turns, {**job.meta, "segments": len(starts)}), job.places[a:b]))
            continue
        prev = job.turns[a - 1]
        report.segments_split += 1
        report.note(job.places[a], f"job {job.job_id}: prompt {job.turns[a].prompt_tokens} < previous "
                    f"prompt+output {prev.prompt_tokens + prev.output_tokens} (compacted): segment {k}")
        meta = {**job.meta, "segment_of": job.job_id, "segment": k}
        out.append((TraceJob(f"{job.job_id}#seg{k}", turns, meta), job.places[a:b]))
    return out


def _impute(turns: list[TraceTurn], medians: dict[str | None, float], overall: float) -> None:
    for t in turns[:-1]:
        if t.tool_seconds is None:
            t.tool_seconds = round(medians.get(t.tool_name, overall), 6)
            t.extra["tool_seconds_imputed"] = True


def repair(jobs: list[RawJob], report: ImportReport) -> list[TraceJob]:
    """Valid trace jobs from ``jobs`` (see the module docstring); counts clamps and segments in the report
    (the counts of kept turns, imputed and estimated ones are taken from the output by the caller)."""
    _clamp(jobs, report)
    medians, overall = _medians(jobs)
    out: list[TraceJob] = []
    seen: dict[str, Place] = {}
    for raw in jobs:
        for job, places in _split(raw, report):
            _impute(job.turns, medians, overall)
            errs = validate_job(job)
            if errs:
                report.drop(places[0], f"job {job.job_id}: {'; '.join(errs[:2])}")
            elif job.job_id in seen:
                report.drop(places[0], f"duplicate job_id {job.job_id!r} (first at {seen[job.job_id]})")
            else:
                seen[job.job_id] = places[0]
                out.append(job)
    return out
