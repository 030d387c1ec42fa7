"""A PNG timeline of a scheduler trace (the JSONL that ``--sched-trace`` writes), with a summary table.

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
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.cli import run_standalone

__all__ = ["HELP", "add_arguments", "main", "plot_timeline", "read_sched_trace", "run", "summarize"]

HELP = "PNG timeline of a --sched-trace JSONL"
Events = list[dict[str, Any]]


def read_sched_trace(path: str | os.PathLike[str]) -> tuple[Events, Events]:
    """``(steps, admits)`` of a scheduler trace, in file order."""
    steps: Events = []
    admits: Events = []
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


def _hit_fraction(admit: dict[str, Any]) -> float:
    return admit.get("hit_tokens", 0) / max(1, admit.get("prompt_tokens", 1))


def summarize(steps: Events, admits: Events) -> dict[str, Any]:
    """The trace in numbers: counts, span, peaks and the mean prefix hit of admissions."""
    times = [e["t"] for e in (*steps, *admits)]
    return {
        "steps": len(steps), "admissions": len(admits),
        "resumed": sum(1 for a in admits if a.get("resumed")),
        "preemptions": sum(len(s.get("preempted") or []) for s in steps),
        "span_s": (max(times) - min(times)) if times else 0.0,
        "peak_running": max((s.get("running", 0) for s in steps), default=0),
        "peak_waiting": max((s.get("waiting", 0) for s in steps), default=0),
        "peak_pinned_blocks": max((s.get("blocks_pinned", 0) for s in steps), default=0),
        "mean_prefix_hit": statistics.fmean(map(_hit_fraction, admits)) if admits else None,
    }


def _blocks_panel(ax: Any, t: list[float], steps: Events) -> None:
    pinned = [s.get("blocks_pinned", 0) for s in steps]
    soft = [s.get("blocks_soft", 0) for s in steps]
    in_use = [max(0, s.get("blocks_in_use", 0) - p - q) for s, p, q in zip(steps, pinned, soft, strict=True)]
    cached = [s.get("blocks_cached_free", 0) for s in steps]
    empty = [s.get("blocks_empty", 0) for s in steps]
    ax.stackplot(t, in_use, pinned, soft, cached, empty, step="post",
                 labels=["in use (requests)", "pinned", "soft pinned", "cached free", "empty"],
                 colors=["tab:blue", "tab:orange", "navajowhite", "tab:green", "0.85"])
    ax.set_ylabel("KV blocks")
    ax.legend(loc="upper right", fontsize=8, ncol=5)


def _queues_panel(ax: Any, t: list[float], steps: Events) -> None:
    ax.step(t, [s.get("waiting", 0) for s in steps], where="post", label="waiting", color="tab:red")
    ax.step(t, [s.get("running", 0) for s in steps], where="post", label="running", color="tab:blue")
    pre_t = [ti for ti, s in zip(t, steps, strict=True) if s.get("preempted")]
    if pre_t:
        ax.vlines(pre_t, 0, 1, transform=ax.get_xaxis_transform(), colors="red", alpha=0.4,
                  linewidth=0.8, label=f"preemption ({len(pre_t)})")
    ax.set_ylabel("requests")
    ax.legend(loc="upper right", fontsize=8)


def _hits_panel(ax: Any, t0: float, admits: Events) -> None:
    for resumed, color, label in ((False, "tab:green", "admitted"), (True, "tab:red", "resumed")):
        pts = [(a["t"] - t0, _hit_fraction(a)) for a in admits if bool(a.get("resumed")) == resumed]
        if pts:
            ax.scatter(*zip(*pts, strict=True), s=8, color=color, label=label)
    ax.set_ylim(-0.05, 1.05)
    ax.set_ylabel("prefix hit")
    ax.set_xlabel("seconds")
    if admits:
        ax.legend(loc="lower right", fontsize=8)


def plot_timeline(path: str | os.PathLike[str], out: str | os.PathLike[str], title: str | None = None) -> Path:
    """Draw the timeline of the trace at ``path`` into the PNG ``out``; returns its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.plots import save_figure

    steps, admits = read_sched_trace(path)
    if not steps:
        raise ValueError(f"{path}: no step events")
    t0 = min([s["t"] for s in steps] + [a["t"] for a in admits])
    t = [s["t"] - t0 for s in steps]
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(11, 8), sharex=True,
                                        gridspec_kw={"height_ratios": [3, 2, 1.4]})
    _blocks_panel(ax1, t, steps)
    ax1.set_title(title or Path(path).name)
    _queues_panel(ax2, t, steps)
    _hits_panel(ax3, t0, admits)
    for ax in (ax1, ax2, ax3):
        ax.grid(alpha=0.3)
    return save_figure(fig, out)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of ``bench timeline``."""
    p.add_argument("trace", help="scheduler trace JSONL (from --sched-trace)")
    p.add_argument("--plot", "-o", "--out", dest="out", default=None,
                   help="PNG to write (default: out/<trace name>_timeline.png)")
    p.add_argument("--json", default=None, help="summary JSON (default: out/<trace name>_timeline.json)")
    p.add_argument("--title", default=None, help="plot title (default: the trace's file name)")


def run(args: argparse.Namespace) -> int:
    """``bench timeline``: print the summary table, write its JSON and draw the PNG."""
    from agent_engine.reporting import print_table, write_json

    stem = Path(args.trace).stem
    out = args.out or f"out/{stem}_timeline.png"
    steps, admits = read_sched_trace(args.trace)
    summary = summarize(steps, admits)
    print_table(["steps", "admissions", "resumed", "preemptions", "span s", "peak running", "peak waiting",
                 "peak pinned blk", "mean prefix hit"], [list(summary.values())])
    write_json(args.json or f"out/{stem}_timeline.json", {"trace": str(args.trace), **summary})
    print(f"wrote {plot_timeline(args.trace, out, args.title)}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.sched_timeline``: the flags and run of ``agent-engine bench timeline``."""
    return run_standalone("timeline", argv)


if __name__ == "__main__":
    sys.exit(main())
