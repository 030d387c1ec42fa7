"""PNG plots of the throughput, scheduler, serving and simulator benchmarks (matplotlib, Agg backend).

Each function takes the JSON payload its benchmark writes (so a plot can be redrawn from the file
alone) and a path. Invariant: every function writes exactly one PNG at ``path`` (parent folders
created) and returns the path; missing measurements (``None``) are left out, never drawn as zero.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from benchmarks.plots import plot_bars, policy_color, save_figure  # noqa: E402

__all__ = ["plot_scheduler", "plot_serve", "plot_sim_slices", "plot_sim_validate", "plot_throughput"]


def _log2_x(ax: Any, xs: list[float], label: str) -> None:
    """A log2 x axis ticked at ``xs`` with plain numbers."""
    ax.set_xscale("log", base=2)
    ticks = sorted(set(xs))
    ax.set_xticks(ticks, [f"{x:g}" for x in ticks])
    ax.minorticks_off()
    ax.set_xlabel(label)


def plot_throughput(payload: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """``bench throughput``: one bar of generated tokens/s per engine (``payload["tok_s"]``)."""
    measured = {name: v for name, v in payload["tok_s"].items() if v is not None}
    title = f"offline generation: {payload.get('num_prompts', '?')} prompts"
    return plot_bars(path, title, measured, "generated tokens / s")


def plot_scheduler(payload: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """``bench scheduler``: microseconds per step against running requests, one line per policy,
    the per-step target as a dashed line."""
    series: dict[str, list[tuple[int, float]]] = {}
    for r in payload["results"].values():
        series.setdefault(r["policy"], []).append((r["num_running"], r["us_per_step"]))
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for policy, pts in series.items():
        xs, ys = zip(*sorted(pts), strict=True)
        ax.plot(xs, ys, marker="o", label=policy, color=policy_color(policy))
    target = payload.get("target_us_at_256")
    if target is not None:
        ax.axhline(target, linestyle="--", color="0.5", linewidth=1, label=f"target at 256 ({target:.0f} us)")
    _log2_x(ax, [r["num_running"] for r in payload["results"].values()], "running requests")
    ax.set_ylabel("us / step")
    ax.set_title("scheduler time per step")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def plot_serve(payload: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """``bench serve``: left, tokens/s against concurrency; right, TTFT mean (solid) and p90 (dashed)
    in milliseconds against concurrency; one colour per server."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for res in payload["results"]:
        name, levels = res["server"], res["levels"]
        conc = [lv["concurrency"] for lv in levels]
        color = policy_color(name)
        ax1.plot(conc, [lv["tokens_per_s"] for lv in levels], marker="o", label=name, color=color)
        ax2.plot(conc, [lv["ttft_mean_s"] * 1e3 for lv in levels], marker="o", label=f"{name} mean", color=color)
        ax2.plot(conc, [lv["ttft_p90_s"] * 1e3 for lv in levels], marker="x", linestyle="--",
                 label=f"{name} p90", color=color)
    all_conc = [lv["concurrency"] for res in payload["results"] for lv in res["levels"]]
    for ax, ylabel, title in ((ax1, "generated tokens / s", "serving throughput"),
                              (ax2, "TTFT (ms)", "time to first token")):
        _log2_x(ax, all_conc, "concurrent requests")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return save_figure(fig, path)


def plot_sim_slices(payload: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """``bench sim-slices``: per (policy, cap, soft pins) the mean share of FCFS's excess removed (%)."""
    bars = {f"{r['policy']} cap {r['cap']} soft {'on' if r['soft_pins'] else 'off'}": 100 * r["excess_removed"]
            for r in payload["rows"]}
    return plot_bars(path, "FCFS excess over unlimited removed (simulated)", bars, "% (mean over slices)")


def plot_sim_validate(payload: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """``bench sim-validate``: measured and simulated mean JCT side by side per policy."""
    results = payload["results"]
    names = list(results)
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    width = 0.38
    for k, (kind, hatch) in enumerate((("measured", ""), ("simulated", "//"))):
        xs = [i + (k - 0.5) * width for i in range(len(names))]
        ys = [results[n][f"{kind}_mean_jct_s"] for n in names]
        bars = ax.bar(xs, ys, width, label=kind, hatch=hatch, color=[policy_color(n) for n in names],
                      edgecolor="black", linewidth=0.5)
        ax.bar_label(bars, fmt="%.1f", fontsize=8)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("mean JCT (s)")
    target = payload.get("target_rel_error")
    ax.set_title("mean JCT: measured vs simulated" + (f" (target within {target:.0%})" if target else ""))
    ax.legend(fontsize=8)
    return save_figure(fig, path)
