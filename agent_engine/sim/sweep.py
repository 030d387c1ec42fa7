"""Policies x loads: every point is one ``simulate`` run; the load where FCFS's JCT doubles; the plot.

Invariants:
- A sweep runs each (policy label, load) point plus one FCFS point at ``UNLOADED_JPS`` (jobs hours
  apart: every job runs alone). Each point is deterministic, so the result does not depend on the
  number of worker processes nor on the order points finish in.
- ``sweep[policy]`` lists that policy's points in increasing load, each ``{"jps", **summary}``.
- ``ratio_at_2x_unloaded`` interpolates linearly between points (with the unloaded JCT at load 0);
  its ``jps`` is None when FCFS never reaches twice its unloaded JCT.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from tqdm import tqdm

from agent_engine.json_types import JsonObject
from agent_engine.sim.cost_model import CostModel
from agent_engine.sim.sim_config import SimConfig
from agent_engine.sim.simulator import simulate
from agent_engine.workloads.traces.format import TraceJob

__all__ = ["UNLOADED_JPS", "plot", "ratio_at_2x_unloaded", "run_sweep"]

UNLOADED_JPS = 1e-4  # jobs ~3 h apart: every job runs alone

_worker: JsonObject = {}  # a worker process's jobs and cost model, set once by its initializer


def _init_worker(jobs: list[TraceJob], cost: CostModel) -> None:
    _worker["jobs"], _worker["cost"] = jobs, cost


def _run_point(cfg: SimConfig) -> JsonObject:
    return simulate(_worker["jobs"], _worker["cost"], cfg).summary()


def _run_points(jobs: list[TraceJob], cost: CostModel, configs: list[SimConfig], workers: int,
                progress: bool) -> list[JsonObject]:
    """The summary of every config, in order; ``workers > 1`` runs them in that many processes."""
    bar = tqdm(total=len(configs), desc="sim points", unit="point", disable=not progress)
    out: list[JsonObject] = [{} for _ in configs]
    try:
        if workers <= 1:
            for k, cfg in enumerate(configs):
                out[k] = simulate(jobs, cost, cfg).summary()
                bar.update(1)
            return out
        with ProcessPoolExecutor(max_workers=workers, initializer=_init_worker, initargs=(jobs, cost)) as ex:
            futures = {ex.submit(_run_point, cfg): k for k, cfg in enumerate(configs)}
            for fut in as_completed(futures):
                out[futures[fut]] = fut.result()
                bar.update(1)
        return out
    finally:
        bar.close()


def run_sweep(jobs: Sequence[TraceJob], cost: CostModel, base: SimConfig, policies: Sequence[str],
              loads: Sequence[float], workers: int = 1, progress: bool = True) -> JsonObject:
    """Every (policy, load) point of ``base`` plus FCFS unloaded: ``{"sweep": {policy: [point...]},
    "unloaded": summary}``; ``policies`` are ``agent_engine.sim.policy_label.POLICIES`` labels."""
    points = [(label, jps, False) for label in policies for jps in loads]
    points.append(("fcfs", UNLOADED_JPS, True))
    points.sort(key=lambda p: -p[1])  # heavy points first: better packing over workers
    configs = [base.for_label(label, jps) for label, jps, _ in points]
    summaries = _run_points(list(jobs), cost, configs, workers, progress)
    sweep: dict[str, list[JsonObject]] = {p: [] for p in policies}
    unloaded: JsonObject = {}
    for (label, jps, is_unloaded), summ in zip(points, summaries, strict=True):
        if is_unloaded:
            unloaded = summ
        else:
            sweep[label].append({"jps": jps, **summ})
    for pts in sweep.values():
        pts.sort(key=lambda d: d["jps"])
    return {"sweep": sweep, "unloaded": unloaded}


def _interp(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    for (x0, y0), (x1, y1) in zip(zip(xs, ys, strict=True), zip(xs[1:], ys[1:], strict=True), strict=False):
        if x0 <= x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0) if x1 > x0 else y0
    return math.nan


def _fcfs_2x_load(fcfs: list[JsonObject], unloaded_jct: float) -> float | None:
    """The load where FCFS's mean JCT first reaches twice ``unloaded_jct`` (None: never)."""
    target = 2.0 * unloaded_jct
    prev = (0.0, unloaded_jct)
    for p in fcfs:
        x, y = p["jps"], p["mean_jct_s"]
        if y >= target:
            x0, y0 = prev
            return x0 + (x - x0) * (target - y0) / (y - y0) if y > y0 else x
        prev = (x, y)
    return None


def ratio_at_2x_unloaded(sweep: dict[str, list[JsonObject]], unloaded_jct: float) -> JsonObject:
    """The load where FCFS's mean JCT first reaches 2x unloaded (linear interpolation) and each policy's
    JCT there, with FCFS / policy ratios; ``jps`` is None when the sweep never reaches 2x."""
    target = 2.0 * unloaded_jct
    jps = _fcfs_2x_load(sweep.get("fcfs", []), unloaded_jct)
    out: JsonObject = {"unloaded_mean_jct_s": unloaded_jct, "target_jct_s": target, "jps": jps}
    if jps is None:
        return out
    for name, pts in sweep.items():
        px = [0.0] + [p["jps"] for p in pts]
        py = [unloaded_jct] + [p["mean_jct_s"] for p in pts]
        jct = _interp(px, py, jps)
        out[name] = {"mean_jct_s": jct, "fcfs_over_policy": target / jct if jct else None}
    return out


def plot(sweep: dict[str, list[JsonObject]], unloaded_jct: float, title: str, path: str) -> None:
    """Mean JCT vs jobs/s per policy (matplotlib Agg), with the 2x-unloaded line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, pts in sweep.items():
        ax.plot([p["jps"] for p in pts], [p["mean_jct_s"] for p in pts], marker="o", label=name)
    ax.axhline(2 * unloaded_jct, color="grey", ls="--", lw=1, label="2x unloaded (FCFS)")
    ax.set_xlabel("load (jobs / s, Poisson)")
    ax.set_ylabel("mean JCT (s)")
    ax.set_yscale("log")
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"wrote {path}")
