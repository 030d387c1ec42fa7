"""Workload profiles: the statistics of an agent trace, fitted from real jobs and stored as JSON.

A profile holds one distribution (``Dist``) for each of: turns per job, the first prompt's size,
output tokens per turn, prompt growth per turn (the tokens a tool's output adds, i.e.
``prompt[i+1] - prompt[i] - output[i]``, globally and per tool), tool seconds per tool; plus the tool
mix as a Markov chain (first-turn tool frequencies and tool-to-tool transition frequencies).

Invariants:
- ``Dist.sample`` is a pure function of the generator's state; integer dists return ints; every
  sample lies in ``[lo, hi]`` when those bounds are set; empirical dists never leave the range of
  the data they were fitted on.
- ``Profile.from_json(p.to_json()) == p`` (JSON round trip), and ``fit_profile`` is deterministic.
- Per-tool dists exist only for tools with at least ``min_samples`` observations; any other tool
  falls back to the ``"*"`` (all tools) entry, which always exists.
- Tool seconds are clamped at 0 before fitting (real traces hold a few slightly negative gaps).
- ``tool_start`` and each row of ``tool_transitions`` sum to 1 (up to rounding).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agent_engine.workloads.traces.format import TraceJob

__all__ = [
    "ALL_TOOLS",
    "BUILTIN_PROFILES",
    "NO_TOOL",
    "QUANTILE_PROBS",
    "Dist",
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

# Quantile grid of empirical dists: fine in both tails, where the slow tools live.
QUANTILE_PROBS: tuple[float, ...] = (
    (0.0, 0.001, 0.005) + tuple(round(i / 100, 2) for i in range(1, 100)) + (0.995, 0.999, 1.0)
)


@dataclass(frozen=True)
class Dist:
    """A 1-D distribution: ``empirical`` (inverse CDF through quantiles), ``lognormal`` or ``normal``.

    ``params``: empirical: ``probs``, ``values`` (both non-decreasing, probs from 0 to 1);
    lognormal: ``mu``, ``sigma`` (of the log); normal: ``mean``, ``std``. Samples are clipped to
    ``[lo, hi]`` (None: unbounded) and rounded when ``integer``.
    """

    kind: str
    params: dict[str, Any]
    integer: bool = False
    lo: float | None = None
    hi: float | None = None

    def sample(self, rng: np.random.Generator, size: int | None = None) -> Any:
        """One sample (``size=None``) or a numpy array of ``size`` samples."""
        n = 1 if size is None else size
        if self.kind == "empirical":
            x = np.interp(rng.random(n), self.params["probs"], self.params["values"])
        elif self.kind == "lognormal":
            x = np.exp(rng.normal(self.params["mu"], self.params["sigma"], n))
        elif self.kind == "normal":
            x = rng.normal(self.params["mean"], self.params["std"], n)
        else:
            raise ValueError(f"unknown dist kind {self.kind!r}")
        if self.lo is not None or self.hi is not None:
            x = np.clip(x, self.lo, self.hi)
        if self.integer:
            x = np.rint(x).astype(np.int64)
        if size is None:
            return int(x[0]) if self.integer else float(x[0])
        return x

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        d: dict[str, Any] = {"kind": self.kind, **self.params, "integer": self.integer}
        if self.lo is not None:
            d["lo"] = self.lo
        if self.hi is not None:
            d["hi"] = self.hi
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Dist:
        """Inverse of ``to_json``."""
        rest = {k: v for k, v in d.items() if k not in ("kind", "integer", "lo", "hi")}
        return cls(
            kind=d["kind"], params=rest, integer=bool(d.get("integer", False)), lo=d.get("lo"), hi=d.get("hi")
        )

    @classmethod
    def empirical(cls, data: Sequence[float], integer: bool = False, digits: int = 4) -> Dist:
        """Quantiles of ``data`` on ``QUANTILE_PROBS`` (values rounded to ``digits`` decimals)."""
        arr = np.asarray(data, dtype=np.float64)
        if arr.size == 0:
            raise ValueError("cannot fit a distribution to no data")
        q = np.quantile(arr, QUANTILE_PROBS)
        values = [int(round(v)) for v in q] if integer else [round(float(v), digits) for v in q]
        return cls("empirical", {"probs": list(QUANTILE_PROBS), "values": values}, integer=integer)

    @classmethod
    def lognormal_fit(cls, data: Sequence[float], floor: float = 1e-3) -> Dist:
        """Log-normal by moments of ``log(max(x, floor))``, clipped to the data's range."""
        arr = np.maximum(np.asarray(data, dtype=np.float64), floor)
        logs = np.log(arr)
        params = {"mu": round(float(logs.mean()), 6), "sigma": round(float(logs.std()), 6)}
        return cls("lognormal", params, lo=round(float(arr.min()), 4), hi=round(float(arr.max()), 4))

    @classmethod
    def lognormal_moments(cls, mean: float, std: float, **kw: Any) -> Dist:
        """Log-normal with the given mean and standard deviation (of x, not of log x)."""
        s2 = math.log(1.0 + (std / mean) ** 2)
        return cls("lognormal", {"mu": math.log(mean) - s2 / 2, "sigma": math.sqrt(s2)}, **kw)


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
    stats: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
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
    def from_json(cls, d: dict[str, Any]) -> Profile:
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
    seconds: dict[str, list[float]] = defaultdict(list)
    growth: dict[str, list[int]] = defaultdict(list)
    start: Counter[str] = Counter()
    trans: dict[str, Counter[str]] = defaultdict(Counter)
    outputs: list[int] = []
    prompts: list[int] = []
    for job in jobs:
        names = [t.tool_name if t.tool_name is not None else NO_TOOL for t in job.turns]
        start[names[0]] += 1
        for i, t in enumerate(job.turns):
            outputs.append(t.output_tokens)
            prompts.append(t.prompt_tokens)
            if t.tool_seconds is not None:
                seconds[names[i]].append(max(0.0, float(t.tool_seconds)))
            if i + 1 < len(job.turns):
                trans[names[i]][names[i + 1]] += 1
                growth[names[i]].append(job.turns[i + 1].prompt_tokens - t.prompt_tokens - t.output_tokens)
    all_seconds = [s for v in seconds.values() for s in v]
    all_growth = [g for v in growth.values() for g in v] or [0]
    per_tool = Dist.empirical if tool_dist == "empirical" else Dist.lognormal_fit
    tool_seconds = {ALL_TOOLS: Dist.empirical(all_seconds or [0.0])}
    tool_seconds.update({k: per_tool(v) for k, v in sorted(seconds.items()) if len(v) >= min_samples})
    growth_tokens = {ALL_TOOLS: Dist.empirical(all_growth, integer=True)}
    growth_tokens.update(
        {k: Dist.empirical(v, integer=True) for k, v in sorted(growth.items()) if len(v) >= min_samples}
    )
    n_turns = [len(j.turns) for j in jobs]
    tool_counts = Counter(t.tool_name if t.tool_name is not None else NO_TOOL for j in jobs for t in j.turns)
    stats = {
        "jobs": len(jobs),
        "turns": int(sum(n_turns)),
        "turns_per_job": {"mean": round(float(np.mean(n_turns)), 3), **_pcts(n_turns, (50, 90, 100))},
        "prompt_tokens": _pcts(prompts, (50, 90, 100)),
        "initial_prompt_tokens": _pcts([j.turns[0].prompt_tokens for j in jobs], (50, 90, 100)),
        "output_tokens": _pcts(outputs, (50, 90, 100)),
        "growth_tokens": _pcts(all_growth, (50, 90, 99, 100)),
        "tool_seconds": _pcts(all_seconds or [0.0], (50, 90, 99, 100)),
        "tool_counts": dict(tool_counts.most_common()),
    }
    return Profile(
        name=name,
        description=description,
        stats=stats,
        turns=Dist.empirical(n_turns, integer=True),
        initial_prompt_tokens=Dist.empirical([j.turns[0].prompt_tokens for j in jobs], integer=True),
        output_tokens=Dist.empirical(outputs, integer=True),
        growth_tokens=growth_tokens,
        tool_seconds=tool_seconds,
        tool_start=_freqs(start),
        tool_transitions={k: _freqs(v) for k, v in sorted(trans.items())},
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
