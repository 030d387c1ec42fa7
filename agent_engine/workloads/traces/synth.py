"""Draw synthetic agent jobs from a ``Profile``, in the trace format
(``agent_engine.workloads.traces.format``).

A job: its turn count from ``turns``; its tool sequence from the Markov chain (``tool_start``, then
``tool_transitions`` of the previous tool, falling back to ``tool_start`` for a tool with no row);
the first prompt from ``initial_prompt_tokens``; each later prompt is the previous prompt plus the
previous output plus a growth draw for the previous turn's tool; output lengths from
``output_tokens``; tool seconds from the turn's tool's dist (fallback ``"*"``).

Invariants:
- Deterministic: job ``i`` depends only on ``(profile, seed, i)``, so ``synthesize(p, n, s)`` is a
  prefix of ``synthesize(p, m, s)`` for ``n <= m``.
- Every job passes ``validate_job``: ``turns >= 1``, ``prompt_tokens >= 1``, ``output_tokens >= 1``,
  growth ``>= 0`` (so prompt[i+1] >= prompt[i] + output[i]), ``tool_seconds >= 0`` on every turn but
  the last and ``None`` on the last.
"""

from __future__ import annotations

import numpy as np

from agent_engine.workloads.traces.format import TraceJob, TraceTurn
from agent_engine.workloads.traces.profile import ALL_TOOLS, NO_TOOL, Profile

__all__ = ["synthesize", "synthesize_job"]


def _choose(rng: np.random.Generator, freqs: dict[str, float]) -> str:
    names = list(freqs)
    p = np.asarray([freqs[n] for n in names], dtype=np.float64)
    return names[int(rng.choice(len(names), p=p / p.sum()))]


def synthesize_job(profile: Profile, seed: int, index: int) -> TraceJob:
    """Job number ``index`` of the stream seeded by ``seed`` (see the module invariants)."""
    rng = np.random.default_rng([seed, index])
    n = max(1, int(profile.turns.sample(rng)))
    tools = [_choose(rng, profile.tool_start)]
    for _ in range(n - 1):
        tools.append(_choose(rng, profile.tool_transitions.get(tools[-1]) or profile.tool_start))
    turns: list[TraceTurn] = []
    prompt = max(1, int(profile.initial_prompt_tokens.sample(rng)))
    for i, tool in enumerate(tools):
        out = max(1, int(profile.output_tokens.sample(rng)))
        last = i == n - 1
        secs = None
        if not last:
            secs = round(
                max(0.0, float(profile.tool_seconds.get(tool, profile.tool_seconds[ALL_TOOLS]).sample(rng))),
                4,
            )
        name = None if tool == NO_TOOL else tool
        turns.append(
            TraceTurn(
                prompt_tokens=prompt,
                output_tokens=out,
                tool_name=name,
                tool_seconds=secs,
                extra={"reasoning_tokens": None, "tool_names": [name] if name else [], "n_tool_calls": 1},
            )
        )
        if not last:
            grow = profile.growth_tokens.get(tool, profile.growth_tokens[ALL_TOOLS])
            prompt = prompt + out + max(0, int(grow.sample(rng)))
    meta = {"source": "synth", "model": None, "run": f"{profile.name}-seed{seed}", "exit_status": "Synthetic"}
    return TraceJob(job_id=f"synth:{profile.name}:{seed}:{index:06d}", turns=turns, meta=meta)


def synthesize(profile: Profile, n_jobs: int, seed: int = 0) -> list[TraceJob]:
    """``n_jobs`` jobs drawn from ``profile`` (deterministic under ``seed``)."""
    if n_jobs < 0:
        raise ValueError("n_jobs must be >= 0")
    return [synthesize_job(profile, seed, i) for i in range(n_jobs)]
