"""Running ``bench jct``'s policies: a fresh server subprocess per policy, the replay, the scraped metrics.

Invariants: servers bind 127.0.0.1 only and are always stopped (``with``); ``prefill_tokens`` = prompt
tokens sent - cached tokens the server reported (client-side counts, so comparable across engines);
``--repeats N`` runs N interleaved rounds (every policy once per round, in the same order), so
machine noise that drifts over minutes hits every policy alike; a policy's row is then the mean over
rounds (percentiles over every round's JCTs together) and ``rounds_mean_jct_s`` keeps each round's mean.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agent_engine.server.launcher import (
    ServerProcess,
    kv_block_shape,
    scrape_metrics,
    start_engine_server,
    start_vllm_server,
    vllm_kv_bytes,
)
from agent_engine.workloads.replay.client import replay_sync
from agent_engine.workloads.replay.records import write_records
from agent_engine.workloads.traces import TraceJob
from benchmarks.jct_cluster import (
    CLUSTER_STARTUP_TIMEOUT_S,
    cluster_args,
    fetch_routing,
    print_cluster_table,
    split_router,
    turn_reuse,
)
from benchmarks.jct_config import (
    VLLM_BLOCK_SIZE,
    JCTConfig,
    PolicyRun,
    policy_engine_args,
    pool_blocks,
    replay_options,
    run_names,
    split_run_name,
    tier_engine_args,
)
from scheduler.policy import PIN_COUNTER_NAMES  # the one place benchmarks read the pin counter names


def _start_server(name: str, cfg: JCTConfig, jobs: Sequence[TraceJob], log_dir: Path,
                  log_name: str | None = None, cluster: Sequence[str] = ()) -> ServerProcess:
    from agent_engine.model.default_model import default_model_dir

    log = log_dir / f"{log_name or name}.log"
    if name == "vllm-cpu":
        model_dir = default_model_dir()
        model_cfg = json.loads((model_dir / "config.json").read_text())
        kv_bytes = vllm_kv_bytes(cfg.kv_tokens, model_cfg)
        assert cfg.vllm is not None
        return start_vllm_server(cfg.vllm, model_dir, kv_bytes, cfg.max_model_len, log,
                                 block_size=VLLM_BLOCK_SIZE, startup_timeout=max(cfg.startup_timeout, 420.0))
    blocks = _pool_blocks(name, cfg, jobs)
    args = [*policy_engine_args(name), *tier_engine_args(name, cfg), "--num-kv-blocks", str(blocks),
            "--block-size", str(cfg.block_size),
            "--max-model-len", str(cfg.max_model_len), "--max-num-seqs", str(cfg.max_num_seqs),
            "--seed", str(cfg.seed), *cluster, *cfg.extra_engine_args]
    if cfg.sched_trace_dir:
        Path(cfg.sched_trace_dir).mkdir(parents=True, exist_ok=True)
        args += ["--sched-trace", str(Path(cfg.sched_trace_dir) / f"{name}.jsonl")]
    timeout = max(cfg.startup_timeout, CLUSTER_STARTUP_TIMEOUT_S) if cluster else cfg.startup_timeout
    return start_engine_server(args, log, name=name, startup_timeout=timeout)


def _pool_blocks(name: str, cfg: JCTConfig, jobs: Sequence[TraceJob]) -> int:
    """The row's pool (``pool_blocks``) with the embedded model's fp32 blocks."""
    from agent_engine.model.default_model import default_model_dir

    model_cfg = json.loads((default_model_dir() / "config.json").read_text())
    return pool_blocks(name, cfg, jobs, kv_block_shape(cfg.block_size, model_cfg))


def _metric(m: dict[str, float], *names: str) -> float | None:
    return next((m[n] for n in names if n in m), None)


def _row(name: str, summary: dict[str, Any], metrics: dict[str, float], wall_s: float,
         blocks: int | None) -> dict[str, Any]:
    pre = _metric(metrics, "agent_engine_preemptions_total", "vllm:num_preemptions_total")
    pins = {k: int(v) for k in PIN_COUNTER_NAMES if (v := _metric(metrics, f"agent_engine_pins_{k}_total")) is not None}
    pbs = _metric(metrics, "agent_engine_pinned_block_seconds_total")
    if pbs is not None:
        pins["pinned_block_seconds"] = round(pbs, 3)
    sbs = _metric(metrics, "agent_engine_soft_pinned_block_seconds_total")
    if sbs is not None:
        pins["soft_block_seconds"] = round(sbs, 3)
    tier = {k: round(v, 3) for k in ("stored", "reloaded", "dropped", "refused", "hit_tokens", "load_seconds",
                                     "save_seconds", "capacity_blocks")
            if (v := _metric(metrics, f"agent_engine_kv_tier_{k}_total", f"agent_engine_kv_tier_{k}")) is not None}
    prompt, cached = summary.get("prompt_tokens") or 0, summary.get("cached_tokens") or 0
    return {
        "mean_jct_s": summary.get("jct_mean"), "p50_jct_s": summary.get("jct_p50"),
        "p90_jct_s": summary.get("jct_p90"), "p99_jct_s": summary.get("jct_p99"),
        "jobs_per_min": summary.get("jobs_per_minute"), "mean_queue_s": summary.get("queue_delay_mean"),
        "prefix_hit_ratio": summary.get("prefix_hit_ratio"), "prefill_tokens": int(prompt - cached),
        "prompt_tokens": int(prompt), "preemptions": int(pre) if pre is not None else None,
        "excess_over_unlimited_s": None, "pins": pins, "jobs_completed": summary.get("jobs_completed"),
        "jobs_failed": summary.get("jobs_failed"), "turns": summary.get("turns"),
        "kv_blocks": blocks, "tier": tier, "wall_s": round(wall_s, 1),
    }


def run_one(name: str, cfg: JCTConfig, jobs: Sequence[TraceJob], log_dir: Path) -> PolicyRun:
    """Start ``name``'s server, replay ``jobs``, scrape its metrics, stop it; the row for the table."""
    t0 = time.perf_counter()
    print(f"[{name}] starting server ...", flush=True)
    base, router = split_router(name)
    policy, hints = split_run_name(base)
    cluster = cluster_args(cfg.replicas, router)
    with _start_server(policy, cfg, jobs, log_dir, log_name=name, cluster=cluster) as srv:
        over: dict[str, Any] = {"hints": hints}
        if policy == "vllm-cpu":
            over["model"] = httpx_model_id(srv.base_url)
        print(f"[{name}] replaying {min(cfg.jobs, len(jobs))} jobs on {srv.base_url}", flush=True)
        load0, cpu0 = os.getloadavg()[0], srv.cpu_seconds()
        result = replay_sync(srv.base_url, jobs, replay_options(cfg, **over))
        metrics = scrape_metrics(srv.base_url)
        routing = fetch_routing(srv.base_url) if router else None
        load1, cpu1 = os.getloadavg()[0], srv.cpu_seconds()
    if cfg.records_dir:
        write_records(Path(cfg.records_dir) / f"{name}.jsonl", result.records)
    blocks = None if policy == "vllm-cpu" else _pool_blocks(policy, cfg, jobs)
    row = _row(name, result.summary, metrics, time.perf_counter() - t0, blocks)
    row["loadavg_1m"] = [round(load0, 2), round(load1, 2)]  # machine load at replay start / end
    row["server_cpu_s"] = round(cpu1 - cpu0, 1) if cpu0 is not None and cpu1 is not None else None
    row["next_turn_reuse"] = turn_reuse(result.turns)
    if router:
        row.update(router=router, replicas=cfg.replicas, routing=routing)
    jcts = sorted(float(j.jct) for j in result.jobs if j.jct is not None and j.error is None)
    errors = [j.error for j in result.jobs if j.error]
    if errors:
        print(f"[{name}] {len(errors)} jobs failed, first: {errors[0]}", flush=True)
    print(f"[{name}] done in {row['wall_s']:.0f} s: mean JCT {row['mean_jct_s'] or float('nan'):.2f} s", flush=True)
    return PolicyRun(name, row, jcts)


def httpx_model_id(base_url: str) -> str | None:
    """The first model id of ``GET /v1/models`` (vLLM needs it in every request)."""
    import httpx

    try:
        data = httpx.get(base_url + "/v1/models", timeout=10).json()
        return str(data["data"][0]["id"])
    except (httpx.HTTPError, KeyError, IndexError, ValueError):
        return None


def merge_rounds(rounds: Sequence[PolicyRun]) -> PolicyRun:
    """One row from a policy's rounds: numeric fields and pin counters averaged, JCT percentiles over
    every round's jobs together, ``rounds_mean_jct_s`` listing each round's mean JCT."""
    if len(rounds) == 1:
        return rounds[0]
    jcts = sorted(j for r in rounds for j in r.jcts)
    row = dict(rounds[-1].row)
    for k in row:
        vals = [r.row.get(k) for r in rounds]
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in vals):
            row[k] = statistics.fmean(vals)  # type: ignore[arg-type]
    pins = [r.row.get("pins") or {} for r in rounds]
    row["pins"] = {k: statistics.fmean(p.get(k, 0) for p in pins) for k in pins[-1]}
    means = [r.row.get("mean_jct_s") for r in rounds]
    row["rounds_mean_jct_s"] = means
    if jcts and all(m is not None for m in means):  # percentiles only when every round finished
        for q in (50, 90, 99):
            row[f"p{q}_jct_s"] = float(np.percentile(jcts, q))
    return PolicyRun(rounds[0].name, row, jcts)


def run_policies(cfg: JCTConfig, jobs: Sequence[TraceJob]) -> dict[str, PolicyRun]:
    """Every policy of ``cfg`` (plus ``vllm-cpu`` when ``cfg.vllm``), in order, one server at a time,
    ``cfg.repeats`` interleaved rounds merged by ``merge_rounds``.

    A policy whose server fails to start (or dies) gets a row with ``error`` and all jobs failed."""
    names = run_names(cfg)
    for n in names:
        if n != "vllm-cpu":
            policy_engine_args(split_run_name(split_router(n)[0])[0])  # fail fast on a typo, before any start
    log_dir = Path(cfg.log_dir)
    rounds: dict[str, list[PolicyRun]] = {n: [] for n in names}
    for k in range(max(1, cfg.repeats)):
        for n in names:
            if cfg.repeats > 1:
                print(f"[{n}] round {k + 1} of {cfg.repeats}", flush=True)
            try:
                rounds[n].append(run_one(n, cfg, jobs, log_dir))
            except (RuntimeError, OSError) as e:  # a server that fails leaves a row saying why; others still run
                print(f"[{n}] FAILED: {e}", flush=True)
                rounds[n].append(PolicyRun(n, {**_row(n, {}, {}, 0.0, None), "error": str(e)[:2000],
                                               "jobs_failed": min(cfg.jobs, len(jobs))}))
    runs = {n: merge_rounds(rs) for n, rs in rounds.items()}
    ref = runs.get("unlimited")
    ref_mean = ref.row["mean_jct_s"] if ref else None
    for r in runs.values():
        if ref_mean is not None and r.row["mean_jct_s"] is not None:
            r.row["excess_over_unlimited_s"] = r.row["mean_jct_s"] - ref_mean
    if cfg.replicas > 1:
        print_cluster_table({n: r.row for n, r in runs.items()}, cfg.replicas)
    return runs
