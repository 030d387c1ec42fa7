"""Next-turn reuse: how much of each job's previous turn the next turn found in the KV cache.

For every turn after a job's first: ``min(cached, previous prompt + previous output)`` over the sum of
``previous prompt + previous output``, over all such turns. 1.0: every later turn found its whole
previous context cached (it landed where that context was kept); near 0: every turn recomputed it.

Invariant: a pure function of per-turn token counts, so the simulator and the benchmarks (which read
the counts the server reported) compute the same number.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def next_turn_reuse(jobs: Iterable[Sequence[tuple[int, int, int]]]) -> float | None:
    """``jobs``: per job, its turns in order as ``(prompt_tokens, output_tokens, cached_tokens)``.

    None when no job has a second turn."""
    reused = reusable = 0
    for turns in jobs:
        for prev, cur in zip(turns, turns[1:], strict=False):
            context = prev[0] + prev[1]
            reusable += context
            reused += min(cur[2], context)
    return reused / reusable if reusable else None
