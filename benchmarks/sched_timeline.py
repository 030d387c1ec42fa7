"""A PNG timeline of a scheduler trace (the JSONL that ``--sched-trace`` writes).

Top panel: KV blocks by state, stacked (in use by requests, pinned, soft pinned, cached-free, empty) per step.
Middle: waiting and running queue lengths, preemptions as red ticks. Bottom: each admission's
prefix-hit fraction (resumed requests marked apart).

Invariants: lines whose ``event`` is neither ``"step"`` nor ``"admit"`` (and blank or torn lines)
are skipped; times are shown relative to the first event; the stacked series never go negative
(pinned and soft-pinned blocks are also counted in ``blocks_in_use``, so "in use" shows the rest).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["add_arguments", "main", "plot_timeline", "read_sched_trace", "run"]


def read_sched_trace(path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(steps, admits)`` of a scheduler trace, in file order."""
    steps: list[dict[str, Any]] = []
    admits: list[dict[str, Any]] = []
    with Path(path).open(encoding="utf-8") as f:
        for line in f:
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(ev, dict):
                continue
            if ev.get("event") == "step":
                steps.append(ev)
            elif ev.get("event") == "admit":
                admits.append(ev)
    return steps, admits


def plot_timeline(path: str | os.PathLike[str], out: str | os.PathLike[str], title: str | None = None) -> Path:
    """Draw the timeline of the trace at ``path`` into the PNG ``out``; returns its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps, admits = read_sched_trace(path)
    if not steps:
        raise ValueError(f"{path}: no step events")
    t0 = min([s["t"] for s in steps] + [a["t"] for a in admits])
    t = [s["t"] - t0 for s in steps]
    pinned = [s.get("blocks_pinned", 0) for s in steps]
    soft = [s.get("blocks_soft", 0) for s in steps]
    in_use = [max(0, s.get("blocks_in_use", 0) - p - q) for s, p, q in zip(steps, pinned, soft, strict=True)]
    cached = [s.get("blocks_cached_free", 0) for s in steps]
    empty = [s.get("blocks_empty", 0) for s in steps]
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(11, 8), sharex=True,
                                        gridspec_kw={"height_ratios": [3, 2, 1.4]})
    ax1.stackplot(t, in_use, pinned, soft, cached, empty, step="post",
                  labels=["in use (requests)", "pinned", "soft pinned", "cached free", "empty"],
                  colors=["tab:blue", "tab:orange", "navajowhite", "tab:green", "0.85"])
    ax1.set_ylabel("KV blocks")
    ax1.legend(loc="upper right", fontsize=8, ncol=5)
    ax1.set_title(title or Path(path).name)
    ax2.step(t, [s.get("waiting", 0) for s in steps], where="post", label="waiting", color="tab:red")
    ax2.step(t, [s.get("running", 0) for s in steps], where="post", label="running", color="tab:blue")
    pre_t = [ti for ti, s in zip(t, steps, strict=True) if s.get("preempted")]
    if pre_t:
        ax2.vlines(pre_t, 0, 1, transform=ax2.get_xaxis_transform(), colors="red", alpha=0.4,
                   linewidth=0.8, label=f"preemption ({len(pre_t)})")
    ax2.set_ylabel("requests")
    ax2.legend(loc="upper right", fontsize=8)
    for resumed, color, label in ((False, "tab:green", "admitted"), (True, "tab:red", "resumed")):
        pts = [(a["t"] - t0, a.get("hit_tokens", 0) / max(1, a.get("prompt_tokens", 1)))
               for a in admits if bool(a.get("resumed")) == resumed]
        if pts:
            ax3.scatter(*zip(*pts, strict=True), s=8, color=color, label=label)
    ax3.set_ylim(-0.05, 1.05)
    ax3.set_ylabel("prefix hit")
    ax3.set_xlabel("seconds")
    if admits:
        ax3.legend(loc="lower right", fontsize=8)
    for ax in (ax1, ax2, ax3):
        ax.grid(alpha=0.3)
    p = Path(out)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return p


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Flags of ``bench timeline``."""
    p.add_argument("trace", help="scheduler trace JSONL (from --sched-trace)")
    p.add_argument("-o", "--out", default=None, help="PNG to write (default: <trace>.png)")
    p.add_argument("--title", default=None)
    return p


def run(args: argparse.Namespace) -> int:
    """``bench timeline``: draw the PNG and print a one-line summary of the trace."""
    out = args.out or str(Path(args.trace).with_suffix(".png"))
    steps, admits = read_sched_trace(args.trace)
    p = plot_timeline(args.trace, out, args.title)
    n_pre = sum(len(s.get("preempted") or []) for s in steps)
    print(f"{len(steps)} steps, {len(admits)} admissions, {n_pre} preemptions -> wrote {p}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.sched_timeline TRACE [-o OUT.png]``."""
    p = argparse.ArgumentParser(prog="agent-engine bench timeline", description=__doc__.split("\n")[0])
    return run(add_arguments(p).parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
