"""Group message-log calls into jobs and turn each job's calls into trace turns.

Grouping: calls that name a job id (``calls.GROUP_KEYS``) form one job per id, across files. Calls
without an id are chained by prefix, in start-time order: a call joins the job whose last call's
messages plus that call's answer are a prefix of its messages (several such jobs: the first whose last
call ended by this call's start); failing that, the one job whose last call's messages are a prefix
followed by an assistant message; otherwise it starts a job named ``<file name>:<line>``. A compacted
context does not chain: without ids it starts a new job.

Ordering: a job's calls are sorted by (start, prompt tokens); a job whose calls were not in that
order in the files is counted and noted; a job with two calls of the same start and prompt length
cannot be ordered and all its lines are dropped.

Turns: ``llm_seconds = end - start``; ``tool_seconds = next start - end`` (unknown when the end is,
negative values kept for the repair step); the last turn's is ``None``. A turn whose token counts
were estimated carries ``"tokens_estimated": true``.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from pathlib import Path

from agent_engine.workloads.traces.format import TraceTurn
from agent_engine.workloads.traces.importers.calls import Call
from agent_engine.workloads.traces.importers.raw import RawJob
from agent_engine.workloads.traces.importers.report import ImportReport

__all__ = ["group_calls"]


def _h(prev: str, key: str) -> str:
    return hashlib.sha1(f"{prev}|{key}".encode()).hexdigest()


def _prefix_hashes(call: Call) -> list[str]:
    """``out[L]``: the rolling hash of the first ``L`` messages."""
    out = [""]
    for key in call.msg_keys:
        out.append(_h(out[-1], key))
    return out


class _Chainer:
    """Prefix chaining of id-less calls (see the module docstring)."""

    def __init__(self) -> None:
        self.jobs: list[list[Call]] = []
        self.strict: dict[str, list[int]] = defaultdict(list)
        self.loose: dict[str, list[int]] = defaultdict(list)
        self.tail: dict[int, tuple[str, str]] = {}

    def add(self, call: Call) -> None:
        hashes = _prefix_hashes(call)
        idx = self._find(call, hashes)
        if idx is None:
            idx = len(self.jobs)
            self.jobs.append([])
        else:
            strict_key, loose_key = self.tail.pop(idx)
            self.strict[strict_key].remove(idx)
            self.loose[loose_key].remove(idx)
        self.jobs[idx].append(call)
        keys = (_h(hashes[-1], call.answer_key), hashes[-1])
        self.tail[idx] = keys
        self.strict[keys[0]].append(idx)
        self.loose[keys[1]].append(idx)

    def _find(self, call: Call, hashes: list[str]) -> int | None:
        for n in range(len(hashes) - 1, 0, -1):
            found = self.strict.get(hashes[n])
            if found:
                ended = [i for i in found if (self.jobs[i][-1].end or self.jobs[i][-1].start) <= call.start]
                return (ended or found)[0]
        for n in range(len(hashes) - 2, 0, -1):
            found = self.loose.get(hashes[n])
            if found and len(found) == 1 and call.roles[n] == "assistant":
                return found[0]
        return None


def _order(calls: list[Call], report: ImportReport, job_id: str) -> list[Call] | None:
    ordered = sorted(calls, key=lambda c: (c.start, c.prompt_tokens))
    for a, b in zip(ordered, ordered[1:], strict=False):
        if (a.start, a.prompt_tokens) == (b.start, b.prompt_tokens):
            for c in calls:
                report.drop(c.place, f"job {job_id} cannot be ordered: lines {a.place.line} and "
                            f"{b.place.line} have the same start time and prompt length")
            return None
    first = next((c for c, o in zip(calls, ordered, strict=True) if c is not o), None)
    if first is not None:
        report.jobs_reordered += 1
        report.note(first.place, f"job {job_id}: calls out of time order, sorted by start time")
    return ordered


def _turns(calls: list[Call]) -> list[TraceTurn]:
    turns = []
    for i, c in enumerate(calls):
        nxt = calls[i + 1] if i + 1 < len(calls) else None
        tool = None if nxt is None or c.end is None else nxt.start - c.end
        t = TraceTurn(prompt_tokens=c.prompt_tokens, output_tokens=c.output_tokens, tool_name=c.tool_name,
                      tool_seconds=tool, cached_tokens=c.cached_tokens,
                      llm_seconds=None if c.end is None else c.end - c.start)
        if c.estimated:
            t.extra["tokens_estimated"] = True
        turns.append(t)
    return turns


def _job(job_id: str, calls: list[Call], grouped_by: str) -> RawJob:
    model = next((c.model for c in calls if c.model), None)
    meta = {"source": f"import:{calls[0].shape}", "model": model, "grouped_by": grouped_by}
    return RawJob(job_id, _turns(calls), [c.place for c in calls], meta)


def group_calls(calls: list[Call], report: ImportReport) -> list[RawJob]:
    """Jobs of ``calls`` (given in file order), each with its calls in time order."""
    by_id: dict[str, list[Call]] = defaultdict(list)
    chainer = _Chainer()
    for c in calls:
        if c.group is not None:
            by_id[c.group].append(c)
    for c in sorted((c for c in calls if c.group is None), key=lambda c: c.start):
        chainer.add(c)
    jobs = []
    for job_id, group in by_id.items():
        ordered = _order(group, report, job_id)
        if ordered is not None:
            jobs.append(_job(job_id, ordered, "id"))
    for chain in chainer.jobs:
        first = chain[0].place
        jobs.append(_job(f"{Path(first.file).name}:{first.line}", chain, "prefix"))
    return jobs
