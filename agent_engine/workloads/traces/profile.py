"""Workload profiles: the statistics of an agent trace, fitted from real jobs and stored as JSON.

A profile holds one distribution (``Dist``) for each of: turns per job, the first prompt's size,
output tokens per turn, prompt growth per turn (the tokens a tool's output adds, i.e.
``prompt[i+1] - prompt[i] - output[i]``, globally and per tool), tool seconds per tool; plus the tool
mix as a Markov chain (first-turn tool frequencies and tool-to-tool transition frequencies).

Invariants (those of ``Dist`` are in ``agent_engine.workloads.traces.dist``):
- ``Profile.from_json(p.to_json()) == p`` (JSON round trip), and ``fit_profile`` is deterministic.
- Per-tool dists exist only for tools with at least ``min_samples`` observations; any other tool
  falls back to the ``"*"`` (all tools) entry, which always exists.
- Tool seconds are clamped at 0 before fitting (real traces hold a few slightly negative gaps).
- ``tool_start`` and each row of ``tool_transitions`` sum to 1 (up to rounding).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from agent_engine.json_types import JsonObject
from agent_engine.workloads.traces.dist import Dist
from agent_engine.workloads.traces.format import TraceJob

__all__ = [
    "ALL_TOOLS",
    "BUILTIN_PROFILES",
    "NO_TOOL",
    "Profile",
    "fit_profile",
    "load_profile",
    "save_profile",
]

ALL_TOOLS = "*"
NO_TOOL = "<none>"  # stands for a null tool_name in the tool-mix tables
PROFILE_VERSION = 1
PROFILES_DIR = Path(__file__).resolve().parent / "profiles"
BUILTIN_PROFILES = ("swe", "bfcl")
_NUM_LIST = re.compile(r"\[\s*([-0-9.eE+,\s]+?)\s*\]")

@dataclass(frozen=True)
class Profile:
    """Everything ``synth`` needs to draw jobs; see the module docstring for the meaning of fields."""

    name: str
    turns: Dist
    initial_prompt_tokens: Dist
    output_tokens: Dist
    growth_tokens: dict[str, Dist]
    tool_seconds: dict[str, Dist]
    tool_start: dict[str, float]
    tool_transitions: dict[str, dict[str, float]]
    description: str = ""
    stats: JsonObject = field(default_factory=dict)

    def to_json(self) -> JsonObject:
        """A JSON-ready dict (``version`` included)."""
        return {
            "version": PROFILE_VERSION,
            "name": self.name,
            "description": self.description,
            "stats": self.stats,
            "turns": self.turns.to_json(),
            "initial_prompt_tokens": self.initial_prompt_tokens.to_json(),
            "output_tokens": self.output_tokens.to_json(),
            "growth_tokens": {k: v.to_json() for k, v in self.growth_tokens.items()},
            "tool_seconds": {k: v.to_json() for k, v in self.tool_seconds.items()},
            "tool_start": self.tool_start,
            "tool_transitions": self.tool_transitions,
        }

    @classmethod
    def from_json(cls, d: JsonObject) -> Profile:
        """Inverse of ``to_json``; checks the version and the ``"*"`` fallbacks."""
        if d.get("version") != PROFILE_VERSION:
            raise ValueError(f"profile version {d.get('version')!r}, expected {PROFILE_VERSION}")
        for key in ("growth_tokens", "tool_seconds"):
            if ALL_TOOLS not in d[key]:
                raise ValueError(f"profile {key} lacks the {ALL_TOOLS!r} fallback")
        return cls(
            name=d["name"],
            description=d.get("description", ""),
            stats=d.get("stats", {}),
            turns=Dist.from_json(d["turns"]),
            initial_prompt_tokens=Dist.from_json(d["initial_prompt_tokens"]),
            output_tokens=Dist.from_json(d["output_tokens"]),
            growth_tokens={k: Dist.from_json(v) for k, v in d["growth_tokens"].items()},
            tool_seconds={k: Dist.from_json(v) for k, v in d["tool_seconds"].items()},
            tool_start=dict(d["tool_start"]),
            tool_transitions={k: dict(v) for k, v in d["tool_transitions"].items()},
        )


def _freqs(counter: Counter[str]) -> dict[str, float]:
    total = sum(counter.values())
    return {k: round(v / total, 6) for k, v in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))}


def _pcts(data: Sequence[float], ps: Sequence[float]) -> dict[str, float]:
    q = np.percentile(np.asarray(data, dtype=np.float64), ps)
    return {f"p{p:g}": round(float(v), 4) for p, v in zip(ps, q, strict=True)}


@dataclass
class _Samples:
    """What ``fit_profile`` measures of a set of jobs, tool names mapped (``None`` -> ``NO_TOOL``)."""

    seconds: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    growth: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    start: Counter[str] = field(default_factory=Counter)
    transitions: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    outputs: list[int] = field(default_factory=list)
    prompts: list[int] = field(default_factory=list)
    initial_prompts: list[int] = field(default_factory=list)
    turns_per_job: list[int] = field(default_factory=list)
    tool_counts: Counter[str] = field(default_factory=Counter)

    def add(self, job: TraceJob) -> None:
        names = [t.tool_name if t.tool_name is not None else NO_TOOL for t in job.turns]
        self.start[names[0]] += 1
        self.turns_per_job.append(len(job.turns))
        self.initial_prompts.append(job.turns[0].prompt_tokens)
        self.tool_counts.update(names)
        for i, t in enumerate(job.turns):
            self.outputs.append(t.output_tokens)
            self.prompts.append(t.prompt_tokens)
            if t.tool_seconds is not None:
                self.seconds[names[i]].append(max(0.0, float(t.tool_seconds)))
            if i + 1 < len(job.turns):
                self.transitions[names[i]][names[i + 1]] += 1
                grown = job.turns[i + 1].prompt_tokens - t.prompt_tokens - t.output_tokens
                self.growth[names[i]].append(grown)

    @property
    def all_seconds(self) -> list[float]:
        return [s for v in self.seconds.values() for s in v] or [0.0]

    @property
    def all_growth(self) -> list[int]:
        return [g for v in self.growth.values() for g in v] or [0]


def _tool_dists(
    samples: _Samples, min_samples: int, tool_dist: str
) -> tuple[dict[str, Dist], dict[str, Dist]]:
    """``(tool_seconds, growth_tokens)``: the ``"*"`` entry plus one per tool with ``min_samples``."""
    per_tool = Dist.empirical if tool_dist == "empirical" else Dist.lognormal_fit
    seconds = {ALL_TOOLS: Dist.empirical(samples.all_seconds)}
    seconds.update({k: per_tool(v) for k, v in sorted(samples.seconds.items()) if len(v) >= min_samples})
    growth = {ALL_TOOLS: Dist.empirical(samples.all_growth, integer=True)}
    growth.update(
        {k: Dist.empirical(v, integer=True) for k, v in sorted(samples.growth.items())
         if len(v) >= min_samples}
    )
    return seconds, growth


def _stats(samples: _Samples) -> JsonObject:
    """The summary statistics a profile carries (for reading, not for sampling)."""
    n_turns = samples.turns_per_job
    return {
        "jobs": len(n_turns),
        "turns": int(sum(n_turns)),
        "turns_per_job": {"mean": round(float(np.mean(n_turns)), 3), **_pcts(n_turns, (50, 90, 100))},
        "prompt_tokens": _pcts(samples.prompts, (50, 90, 100)),
        "initial_prompt_tokens": _pcts(samples.initial_prompts, (50, 90, 100)),
        "output_tokens": _pcts(samples.outputs, (50, 90, 100)),
        "growth_tokens": _pcts(samples.all_growth, (50, 90, 99, 100)),
        "tool_seconds": _pcts(samples.all_seconds, (50, 90, 99, 100)),
        "tool_counts": dict(samples.tool_counts.most_common()),
    }


def fit_profile(
    jobs: Sequence[TraceJob],
    name: str = "fitted",
    min_samples: int = 20,
    tool_dist: str = "empirical",
    description: str = "",
) -> Profile:
    """Measure a profile from real jobs (deterministic; see the module docstring).

    ``tool_dist``: ``"empirical"`` (quantiles) or ``"lognormal"`` per tool; the ``"*"`` entries are
    always empirical.
    """
    if not jobs:
        raise ValueError("cannot fit a profile to no jobs")
    if tool_dist not in ("empirical", "lognormal"):
        raise ValueError(f"tool_dist must be 'empirical' or 'lognormal', got {tool_dist!r}")
    samples = _Samples()
    for job in jobs:
        samples.add(job)
    tool_seconds, growth_tokens = _tool_dists(samples, min_samples, tool_dist)
    return Profile(
        name=name,
        description=description,
        stats=_stats(samples),
        turns=Dist.empirical(samples.turns_per_job, integer=True),
        initial_prompt_tokens=Dist.empirical(samples.initial_prompts, integer=True),
        output_tokens=Dist.empirical(samples.outputs, integer=True),
        growth_tokens=growth_tokens,
        tool_seconds=tool_seconds,
        tool_start=_freqs(samples.start),
        tool_transitions={k: _freqs(v) for k, v in sorted(samples.transitions.items())},
    )


def save_profile(profile: Profile, path: str | os.PathLike[str]) -> None:
    """Write the profile as indented JSON (parent folders created)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(profile.to_json(), indent=1)
    # Keep number lists (quantile tables) on one line each.
    text = _NUM_LIST.sub(lambda m: "[" + re.sub(r"\s+", " ", m.group(1)) + "]", text)
    p.write_text(text + "\n", encoding="utf-8")


def load_profile(name_or_path: str | os.PathLike[str]) -> Profile:
    """A built-in profile by name (``swe``, ``bfcl``) or a profile JSON file by path."""
    s = str(name_or_path)
    path = PROFILES_DIR / f"{s}.json" if s in BUILTIN_PROFILES else Path(s)
    if not path.is_file():
        raise FileNotFoundError(f"no profile {s!r} (built-in: {', '.join(BUILTIN_PROFILES)}; or a JSON path)")
    return Profile.from_json(json.loads(path.read_text(encoding="utf-8")))
