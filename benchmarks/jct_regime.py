"""The regime of a JCT run: this machine's re-prefill cost measured, the run placed against the paper's.

Before a JCT run (``bench jct``, ``bench ttl-sweep``, ``bench jct-load``, the demo), a probe server of
the run's own engine flags prefills fresh prompts of a few lengths (one request at a time, one output
token) and gives the prompt-processing curve (``PrefillCurve``). From it and the trace:

- the run's regime (``agent_engine.sim.regime``): mean re-prefill seconds of an evicted turn against
  mean tool seconds, and KV pressure;
- the reference regime: the paper's setting (Llama-3.1-8B on one H100 running SWE agent jobs whole
  at full token scale, as the simulator's clock prices the shipped trace; one fixed regime);
- the knobs the user left open (``JCTConfig.match``) chosen so that the run lands there: the token
  scale (bisection on the ratio; capped so that every planned turn fits ``max_model_len``), then the
  time scale where that cap falls short, then the KV pool for the reference pressure (and the context
  limit lowered to that pool when it is smaller).

Invariants: every policy of the run sees the same chosen values (they are settled once, before any
policy starts); a knob the user gave is never changed; the probe binds 127.0.0.1 and is always stopped.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from agent_engine.server.launcher import start_engine_server
from agent_engine.sim.regime import (
    REFERENCE_GPU,
    REFERENCE_KV_PRESSURE,
    REFERENCE_MODEL,
    PrefillCurve,
    Regime,
    match_scales,
    peak_contexts,
    pool_tokens_for,
    reference_regime,
    workload_regime,
)
from agent_engine.workloads.replay.plan import ReplayOptions
from agent_engine.workloads.traces import TraceJob
from benchmarks.jct_config import JCTConfig, replay_options

__all__ = ["PROBE_LENGTHS", "RegimeReport", "measure_prefill", "probe_lengths", "reload_cost_args", "settle_and_print",
           "settle_regime"]

PROBE_LENGTHS = (256, 1024, 2048, 4096)  # prompt tokens; capped by the run's max_model_len
_LONG_PROBE = 1024  # lengths above this are timed once, shorter ones best of two


@dataclass(frozen=True)
class RegimeReport:
    """Where a run sits (``run``) against the paper's setting (``reference``), and what was chosen."""

    run: Regime
    reference: Regime
    prefill: PrefillCurve
    chosen: dict[str, float]

    def line(self) -> str:
        """The one regime line every JCT command prints before its table."""
        chosen = ", ".join(f"{k.replace('_', ' ')} {v:g}" for k, v in self.chosen.items()) or "as given"
        rates = ", ".join(f"{n}: {r:,.0f}" for n, r in self.prefill.tokens_per_s().items())
        return (f"regime: {self.run.describe()}; reference ({REFERENCE_MODEL} on one {REFERENCE_GPU}, "
                f"SWE agent jobs at full scale): {self.reference.describe()}; chosen: {chosen}; "
                f"prompt tok/s here ({rates})")

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``config.regime``)."""
        return {"run": self.run.to_dict(), "reference": self.reference.to_dict(), "chosen": self.chosen,
                "reference_setting": f"{REFERENCE_MODEL} on one {REFERENCE_GPU}",
                "prefill_points": [list(p) for p in self.prefill.points]}


def _prefill_seconds(client: httpx.Client, tokens: int, rng: np.random.Generator) -> float:
    """Wall seconds of one fresh prompt of ``tokens`` ids (the replay's own id range) answered with one token."""
    ids = rng.integers(ReplayOptions.min_token_id, ReplayOptions.vocab_size, tokens).tolist()
    t0 = time.perf_counter()
    resp = client.post("/v1/completions", json={"prompt": ids, "max_tokens": 1, "temperature": 0,
                                                "ignore_eos": True})
    if resp.status_code != 200:
        raise RuntimeError(f"regime probe: HTTP {resp.status_code}: {resp.text[:300]}")
    return time.perf_counter() - t0


def probe_lengths(cfg: JCTConfig, jobs: Sequence[TraceJob], lengths: Sequence[int] = PROBE_LENGTHS) -> list[int]:
    """The prompt lengths to time: ``lengths`` up to the context limit, or, when the token scale is given,
    up to the first one that covers every planned context (longer ones would price nothing)."""
    top = cfg.max_model_len - 2
    if "token_scale" not in cfg.match:
        top = min(top, max(peak_contexts(jobs[: cfg.jobs], replay_options(cfg, progress=False)), default=top))
    sizes = sorted({min(n, cfg.max_model_len - 2) for n in lengths if n > 0})
    covering = [n for n in sizes if n >= top]
    return [n for n in sizes if n < top] + covering[:1]


def measure_prefill(cfg: JCTConfig, log_dir: Path, sizes: Sequence[int]) -> PrefillCurve:
    """Prompt-processing seconds of each of ``sizes`` on a probe server with ``cfg``'s engine flags (FCFS)."""
    blocks = math.ceil(cfg.max_model_len / cfg.block_size) + 2
    args = ["--policy", "fcfs", "--num-kv-blocks", str(blocks), "--block-size", str(cfg.block_size),
            "--max-model-len", str(cfg.max_model_len), "--seed", str(cfg.seed), *cfg.extra_engine_args]
    rng = np.random.default_rng([cfg.seed, 7])
    log_dir.mkdir(parents=True, exist_ok=True)
    with start_engine_server(args, log_dir / "regime_probe.log", name="regime-probe",
                             startup_timeout=cfg.startup_timeout) as srv, \
            httpx.Client(base_url=srv.base_url, timeout=httpx.Timeout(600.0, connect=10.0)) as client:
        _prefill_seconds(client, 32, rng)  # warm-up
        points = [(n, min(_prefill_seconds(client, n, rng) for _ in range(1 if n > _LONG_PROBE else 2)))
                  for n in sizes]
    return PrefillCurve(tuple(points))


def settle_regime(cfg: JCTConfig, jobs: Sequence[TraceJob],
                  prefill: PrefillCurve | None = None) -> tuple[JCTConfig, RegimeReport]:
    """``cfg`` with the knobs of ``cfg.match`` chosen for the reference regime, and the report.

    ``prefill`` (measured by ``measure_prefill`` when None) prices this machine's re-prefills."""
    jobs = list(jobs[: cfg.jobs])
    curve = prefill or measure_prefill(cfg, Path(cfg.log_dir), probe_lengths(cfg, jobs))
    reference = reference_regime()
    chosen: dict[str, float] = {}
    if "token_scale" in cfg.match or "time_scale" in cfg.match:
        token, time_scale = match_scales(jobs, replay_options(cfg, progress=False), curve, reference.ratio,
                                         cfg.max_model_len, scale_tokens="token_scale" in cfg.match,
                                         scale_time="time_scale" in cfg.match)
        chosen.update({k: v for k, v in (("token_scale", token), ("time_scale", time_scale)) if k in cfg.match})
        cfg = replace(cfg, token_scale=token, time_scale=time_scale)
    if "num_kv_blocks" in cfg.match:
        tokens = pool_tokens_for(jobs, replay_options(cfg, progress=False), REFERENCE_KV_PRESSURE)
        blocks = math.ceil(tokens / cfg.block_size) + 1  # the engine keeps one null block
        chosen["num_kv_blocks"] = blocks
        # A pool smaller than the context limit bounds it (every planned turn still fits: the pool holds
        # the largest job's peak context).
        cfg = replace(cfg, num_kv_blocks=blocks, max_model_len=min(cfg.max_model_len, (blocks - 1) * cfg.block_size))
    run = workload_regime(jobs, replay_options(cfg, progress=False), curve, (cfg.num_kv_blocks - 1) * cfg.block_size)
    return cfg, RegimeReport(run, reference, curve, chosen)


def settle_and_print(cfg: JCTConfig, jobs: Sequence[TraceJob]) -> tuple[JCTConfig, RegimeReport]:
    """``settle_regime`` with its progress and the regime line printed (what every JCT command does)."""
    print("measuring this machine's prompt processing for the regime ...", flush=True)
    cfg, report = settle_regime(cfg, jobs)
    print(report.line(), flush=True)
    return cfg, report


def reload_cost_args(report: RegimeReport, path: Path) -> tuple[str, ...]:
    """Server flags that give a CONTINUUM server the probe's measured prefill cost (a quadratic fitted to
    its points, written to ``path``) instead of timing prefills again at its own start-up."""
    from estimator.reload_cost import ReloadCostModel

    lengths, seconds = zip(*report.prefill.points, strict=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    ReloadCostModel.fit(lengths, seconds).save(path)
    return ("--reload-cost-profile", str(path))
