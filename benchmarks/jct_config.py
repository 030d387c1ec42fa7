"""``bench jct``'s setting: the config, its flags, the trace and the KV pool sizes it implies.

Policies (``policy_engine_args``): each scheduling policy of ``agent_engine.config.POLICY_NAMES``
(``fcfs`` is FCFS + prefix caching); ``continuum`` (ttl-policy paper) and ``continuum-<ttl policy>``
for each other TTL policy, ``continuum-fixed`` taking the engine's default pin threshold and
``continuum-fixed@X`` threshold X (the label grammar and its one parser:
``agent_engine.sim.policy_label``); ``unlimited`` (FCFS with a pool that holds every job's peak
context at once: the reference) and ``vllm-cpu`` (added by ``--vllm PYTHON``; block size 32, same KV
budget in bytes). ``--hints`` replays each policy once per client hint style (``continuum+hints=none``:
no hint at all, the server infers the jobs). ``--replicas N --routers ...`` runs each row once per
router against N engine replicas on Ray Serve (``jct_cluster``).

Invariants: every policy replays the identical job list with identical ``ReplayOptions`` (seed
included); only the server's flags differ (the engine's own flags, ``ENGINE_FLAGS``, with the
benchmark's defaults where ``ENGINE_DEFAULTS`` lists them), and the KV pool is ``--num-kv-blocks``
for every engine but ``unlimited``. The trace comes from the one resolver (``load_trace``): the
shipped default trace, ``synth:PROFILE`` or a path.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from agent_engine.config import EngineConfig, parse_size
from agent_engine.reporting import machine_info
from agent_engine.sim.policy_label import FIXED_TTL, POLICIES, parse_label
from agent_engine.sim.regime import peak_contexts
from agent_engine.workloads.hint_styles import HINT_STYLES
from agent_engine.workloads.replay.client import ReplayOptions
from agent_engine.workloads.traces import TraceJob, load_trace, trace_label
from benchmarks.jct_cluster import parse_routers, with_routers
from scheduler import policy_class
from scheduler.tier_copy import KVBlockShape, tier_blocks

VLLM_BLOCK_SIZE = 32
MATCHABLE = ("token_scale", "time_scale", "num_kv_blocks")  # the knobs a run may leave to the regime
UNLIMITED = "unlimited"  # FCFS with a pool that holds every job's peak context at once
DEFAULT_PIN_THRESHOLD: float = EngineConfig.pin_threshold
HINTS_SEP = "+hints="
# The engine options ``bench jct`` sets on every server: ``EngineConfig``'s own flags (``add_jct_args``).
ENGINE_FLAGS = ("num_kv_blocks", "block_size", "max_model_len", "max_num_seqs", "kv_offload_bytes",
                "kv_offload_dtype")


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
    max_num_seqs: int = EngineConfig.max_num_seqs
    vllm: str | None = None
    log_dir: str = "out/jct_logs"
    records_dir: str | None = None
    sched_trace_dir: str | None = None
    extra_engine_args: tuple[str, ...] = ()
    progress: bool = True
    startup_timeout: float = 180.0
    repeats: int = 1
    hints: tuple[str, ...] = ("job_id",)  # client styles (``workloads.hint_styles``); each policy runs under each
    replicas: int = 1  # > 1: every row once per router against N replicas on Ray Serve (``jct_cluster``)
    routers: tuple[str, ...] = ("affinity", "pow2", "rr")
    kv_offload_bytes: str = str(EngineConfig.kv_offload_bytes)  # ``+tier`` rows' tier (``+pool``: pool blocks)
    kv_offload_dtype: str = EngineConfig.kv_offload_dtype
    # Knobs (of ``MATCHABLE``) the run leaves to the measured regime: ``jct_regime.settle_regime``
    # replaces their values above before any policy starts. The flags leave open every one the user omits.
    match: frozenset[str] = frozenset()

    @property
    def kv_tokens(self) -> int:
        """The KV pool in tokens (every policy but ``unlimited``)."""
        return self.num_kv_blocks * self.block_size


# Where the benchmark's defaults (``JCTConfig``'s) differ from the engine's: bigger blocks and a bounded
# context. Every other engine flag of ``ENGINE_FLAGS`` keeps the engine's default; the pool's (None) means
# here: sized for the measured regime (``jct_regime``).
ENGINE_DEFAULTS: dict[str, object] = {"block_size": JCTConfig.block_size, "max_model_len": JCTConfig.max_model_len}
REGIME_CHOSEN = "chosen from the measured regime"  # the help of a flag the regime fills when omitted


@dataclass
class PolicyRun:
    """What one policy's run produced (row for the table, JSON and the plots)."""

    name: str
    row: dict[str, Any]
    jcts: list[float] = field(default_factory=list)


def load_trace_jobs(trace: str | None, n_jobs: int, seed: int = 0) -> tuple[list[TraceJob], str]:
    """The first ``n_jobs`` jobs of ``trace`` (see ``load_trace``) and the label to record it under."""
    return load_trace(trace, max_jobs=n_jobs, seed=seed), trace_label(trace)


def run_name(policy: str, hints: str) -> str:
    """The row name of ``policy`` replayed with client style ``hints`` (ours, ``job_id``, adds nothing)."""
    return policy if hints == "job_id" else f"{policy}{HINTS_SEP}{hints}"


def split_run_name(name: str) -> tuple[str, str]:
    """``(policy, hints)`` of a row name made by ``run_name``."""
    policy, sep, hints = name.partition(HINTS_SEP)
    return policy, (hints if sep else "job_id")


def run_names(cfg: JCTConfig) -> list[str]:
    """Every row to run: each policy under each hint style (then ``vllm-cpu`` when asked for)."""
    names = [run_name(p, h) for p in cfg.policies for h in cfg.hints]
    names += ["vllm-cpu"] if cfg.vllm and "vllm-cpu" not in cfg.policies else []
    return with_routers(names, cfg.replicas, cfg.routers)


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
    return sum(math.ceil(peak / cfg.block_size) + 1 for peak in peak_contexts(jobs, replay_options(cfg, progress=False)))


def unlimited_blocks(jobs: Sequence[TraceJob], cfg: JCTConfig) -> int:
    """A pool (blocks) holding every job's peak context at once, plus 25% and 64 blocks of slack."""
    return max(cfg.num_kv_blocks, int(peak_blocks(jobs, cfg) * 1.25) + 64)


def bench_policy_names() -> tuple[str, ...]:
    """The policy names ``bench jct`` takes (``@SECONDS`` and ``+tier``/``+pool`` aside): the policy
    labels (``agent_engine.sim.policy_label.POLICIES``), plus ``unlimited``."""
    return (*POLICIES, UNLIMITED)


def memory_variant(name: str) -> str:
    """A row's memory variant ("", ``tier`` or ``pool``; ``unlimited`` has none); ``ValueError`` on a
    name that is neither ``unlimited`` nor a policy label."""
    return "" if name == UNLIMITED else parse_label(name).memory


def tier_engine_args(name: str, cfg: JCTConfig) -> list[str]:
    """The second tier's flags of a row: ``cfg``'s tier for a ``+tier`` policy, none otherwise."""
    if memory_variant(name) != "tier":
        return []
    if not parse_size(cfg.kv_offload_bytes):
        raise ValueError(f"policy {name!r} needs a second tier: give --kv-offload-bytes")
    return ["--kv-offload-bytes", cfg.kv_offload_bytes, "--kv-offload-dtype", cfg.kv_offload_dtype]


def pool_blocks(name: str, cfg: JCTConfig, jobs: Sequence[TraceJob], block: KVBlockShape) -> int:
    """A row's KV pool in blocks: ``unlimited``'s, or ``--num-kv-blocks`` grown by the tier's bytes for a
    ``+pool`` policy (the equal-memory reference: those bytes as blocks of the pool's ``block``)."""
    if name == UNLIMITED:
        return unlimited_blocks(jobs, cfg)
    if memory_variant(name) == "pool":
        grown = tier_blocks(parse_size(cfg.kv_offload_bytes), block, "auto")
        if not grown:
            raise ValueError(f"policy {name!r} needs a second tier's bytes: give --kv-offload-bytes")
        return cfg.num_kv_blocks + grown
    return cfg.num_kv_blocks


def policy_engine_args(name: str) -> list[str]:
    """Server flags of a policy name (without the pool size and the tier); ``ValueError`` on an
    unknown name.

    ``unlimited`` runs FCFS; every other name is a policy label (``parse_label``: ``@SECONDS`` only
    after a fixed TTL, a ``+tier`` or ``+pool`` suffix for ``tier_engine_args`` and ``pool_blocks``).
    A fixed TTL without ``@`` gets the engine's default pin threshold.
    """
    if name == UNLIMITED:
        return ["--policy", "fcfs"]
    label = parse_label(name)
    if not policy_class(label.policy).uses_pins:
        return ["--policy", label.policy]
    args = ["--policy", label.policy, "--ttl-policy", label.ttl_policy]
    if label.ttl_policy == FIXED_TTL:
        thr = DEFAULT_PIN_THRESHOLD if label.pin_threshold is None else label.pin_threshold
        args += ["--pin-threshold", f"{thr:g}"]
    return args


def add_jct_args(p: argparse.ArgumentParser, with_outputs: bool = True) -> None:
    """The flags of ``bench jct`` (shared by ``jct-load`` and ``ttl-sweep``)."""
    d = JCTConfig()
    p.add_argument("--trace", default=None,
                   help="trace JSONL, synth:<profile>, live (our agent's own turns) or default (default: the shipped agent trace)")
    p.add_argument("--policies", default=",".join(d.policies),
                   help=f"comma list of {', '.join(bench_policy_names())}, continuum-{FIXED_TTL}@THRESHOLD "
                        f"(default {','.join(d.policies)}); a policy ending in +tier gets a second KV tier "
                        "of --kv-offload-bytes in --kv-offload-dtype, one ending in +pool a pool grown by "
                        "those bytes instead (the equal-memory reference); --num-kv-blocks is every pool "
                        "but unlimited's")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--jps", type=float, default=None, help="Poisson job arrivals per second (open loop)")
    mode.add_argument("--concurrency", type=int, default=None,
                      help=f"closed loop: at most N jobs in flight (default {d.concurrency} without --jps)")
    p.add_argument("--jobs", type=int, default=d.jobs)
    p.add_argument("--max-turns", type=int, default=d.max_turns)
    p.add_argument("--token-scale", type=float, default=None,
                   help=f"scale of every token count of the trace (default: {REGIME_CHOSEN}: re-prefill "
                        "against tool seconds as in the paper's setting, within --max-model-len)")
    p.add_argument("--time-scale", type=float, default=None,
                   help=f"scale of every tool call's seconds (default: {REGIME_CHOSEN}: 1, or shorter "
                        "where the token scale alone cannot reach it)")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--hints", default="job_id",
                   help=f"comma list of client hint styles, each policy runs under each: {', '.join(HINT_STYLES)}")
    p.add_argument("--vllm", default=None, metavar="PYTHON", help="add a vllm-cpu row run by this interpreter")
    p.add_argument("--replicas", type=int, default=d.replicas,
                   help="N > 1: serve N replicas on Ray Serve, each row once per --routers (default 1)")
    p.add_argument("--routers", default=",".join(d.routers),
                   help=f"with --replicas > 1: comma list of routers (default {','.join(d.routers)})")
    EngineConfig.add_arguments(p, ENGINE_FLAGS, ENGINE_DEFAULTS,
                               title=f"engine options of every server (--num-kv-blocks omitted: {REGIME_CHOSEN})")
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


def config_from_args(args: argparse.Namespace) -> JCTConfig:
    """``JCTConfig`` from ``add_jct_args`` flags (closed loop of 16 when neither --jps nor --concurrency)."""
    conc = args.concurrency if args.concurrency is not None or args.jps is not None else JCTConfig.concurrency
    given = {name: getattr(args, name) for name in MATCHABLE}
    return JCTConfig(
        trace=args.trace, policies=tuple(p.strip() for p in args.policies.split(",") if p.strip()),
        jps=args.jps, concurrency=conc, jobs=args.jobs, max_turns=args.max_turns,
        **{name: value for name, value in given.items() if value is not None}, seed=args.seed,
        match=frozenset(name for name, value in given.items() if value is None),
        block_size=args.block_size, max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs, vllm=args.vllm, log_dir=args.log_dir, records_dir=args.records_dir,
        sched_trace_dir=args.sched_trace_dir, extra_engine_args=tuple(args.engine_arg),
        progress=not args.no_progress, repeats=args.repeats, hints=_hint_styles(args.hints),
        replicas=max(1, args.replicas), routers=parse_routers(args.routers),
        kv_offload_bytes=args.kv_offload_bytes, kv_offload_dtype=args.kv_offload_dtype,
    )


def _hint_styles(text: str) -> tuple[str, ...]:
    styles = tuple(h.strip() for h in text.split(",") if h.strip())
    bad = [h for h in styles if h not in HINT_STYLES]
    if bad or not styles:
        raise ValueError(f"--hints: unknown style(s) {bad}; known: {', '.join(HINT_STYLES)}")
    return styles


def config_payload(cfg: JCTConfig, trace_name: str, jobs: Sequence[TraceJob],
                   regime: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``config`` section of the JSON: knobs, derived pool sizes, machine info and the run's regime
    (``jct_regime.RegimeReport.to_dict``) when given."""
    d = asdict(cfg)
    d.update(match=sorted(cfg.match), trace=trace_name, kv_tokens=cfg.kv_tokens,
             unlimited_kv_blocks=unlimited_blocks(jobs, cfg), machine=machine_info(),
             loadavg_start=list(os.getloadavg()))
    if regime is not None:
        d["regime"] = regime
    if cfg.vllm:
        d["vllm_block_size"] = VLLM_BLOCK_SIZE
    return d
