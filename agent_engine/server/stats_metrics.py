"""The engine's gauges and cumulative counters, read from a typed ``EngineStats`` snapshot at scrape time.

Each series names the field it reads (the tables below: metric name, help text, the field), so a
renamed or missing field is an error where it is read, never a series that silently disappears. A
source the snapshot lacks (no second tier, no job inference) yields no series; without a snapshot
(none taken yet) the collector yields nothing.

Invariants: the collector reads only the snapshot it was handed (never the engine: the snapshot was
taken on the engine thread); pin counters are named by ``scheduler.policy.PIN_COUNTER_NAMES`` (the
server's only use of those names), job inference's by its ``InferenceStats`` fields.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import fields

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from agent_engine.engine.engine_stats import EngineStats, GrammarStats, InferenceStats, TierStoreStats
from scheduler import SchedulerStats
from scheduler.observability import TierStats

# The server package's only import of the pin counter names: repoint this line when they move.
from scheduler.policy import PIN_COUNTER_NAMES

PREFIX = "agent_engine"

Series = tuple[str, str, Callable[[SchedulerStats], float]]
_SCHEDULER_GAUGES: tuple[Series, ...] = (
    ("requests_running", "Requests currently running in the engine", lambda s: s.num_running),
    ("requests_waiting", "Requests waiting to be scheduled", lambda s: s.num_waiting),
    ("kv_blocks_in_use", "KV blocks referenced by requests", lambda s: s.blocks_in_use),
    ("kv_blocks_cached_free", "Free KV blocks that still hold a cached prefix", lambda s: s.blocks_cached_free),
    ("kv_blocks_empty", "Free KV blocks without cached content", lambda s: s.blocks_empty),
    ("kv_blocks_pinned", "Distinct KV blocks held by CONTINUUM pins (a shared prefix once)",
     lambda s: s.blocks_pinned),
    ("kv_pin_block_refs", "Pinned blocks as the pin cap counts them (once per job holding one)",
     lambda s: s.pin_block_refs),
    ("kv_blocks_soft_pinned", "KV blocks held by CONTINUUM soft pin tails (past the cap)", lambda s: s.blocks_soft),
    ("pinned_jobs", "Jobs holding a pin now", lambda s: s.num_pinned_jobs),
    ("kv_blocks_total", "Usable KV blocks in the pool", lambda s: s.num_blocks),
)
_SCHEDULER_COUNTERS: tuple[Series, ...] = (
    ("prefix_cache_queried_tokens", "Prompt tokens looked up in the prefix cache", lambda s: s.prefix_query_tokens),
    ("prefix_cache_hit_tokens", "Prompt tokens found in the prefix cache", lambda s: s.prefix_hit_tokens),
    ("preemptions", "Requests preempted for lack of KV blocks", lambda s: s.num_preemptions),
)
_TIER_GAUGES: tuple[tuple[str, str, Callable[[TierStats], float]], ...] = (
    ("blocks", "KV blocks held in the second tier", lambda t: t.blocks),
    ("capacity_blocks", "KV blocks the second tier holds at most", lambda t: t.capacity_blocks),
)
_TIER_COUNTERS: tuple[tuple[str, str, Callable[[TierStats], float]], ...] = (
    ("stored", "Blocks demoted into the second tier", lambda t: t.stored),
    ("reloaded", "Blocks loaded back from the second tier", lambda t: t.reloaded),
    ("prefetched", "Blocks loaded back ahead of their job's predicted return (part of reloaded)",
     lambda t: t.prefetched),
    ("dropped", "Second-tier entries evicted (for room, or their job ended)", lambda t: t.dropped),
    ("refused", "Evicted blocks not demoted (worthless, or every entry worth more)", lambda t: t.refused),
    ("cleared", "Second-tier entries forgotten by a prefix-cache reset", lambda t: t.cleared),
    ("hit_tokens", "Prompt tokens served by a lookup's loads from the second tier", lambda t: t.hit_tokens),
)
_STORE_GAUGES: tuple[tuple[str, str, Callable[[TierStoreStats], float]], ...] = (
    ("bytes", "Bytes of host memory the second tier takes", lambda t: t.bytes),
)
_STORE_COUNTERS: tuple[tuple[str, str, Callable[[TierStoreStats], float]], ...] = (
    ("load_seconds", "Seconds spent loading blocks back from the second tier", lambda t: t.load_seconds),
    ("save_seconds", "Seconds spent copying blocks into the second tier", lambda t: t.save_seconds),
)
_GRAMMAR_COUNTERS: tuple[tuple[str, str, Callable[[GrammarStats], float]], ...] = (
    ("grammar_cache_misses", "Output formats compiled (not found in the grammar cache)",
     lambda g: g.grammar_cache_misses),
    ("grammar_compile_seconds", "Seconds spent compiling output formats in the server process",
     lambda g: g.grammar_compile_seconds),
    ("grammar_compiles_timed_out", "Trial compiles killed at --grammar-compile-timeout (400s)",
     lambda g: g.grammar_compiles_timed_out),
    ("grammar_compiles_cancelled", "Trial compiles killed because their client went away",
     lambda g: g.grammar_compiles_cancelled),
    ("grammar_compiles_demoted", "Fast-lane trial compiles stopped at its budget (then tried on the main lane)",
     lambda g: g.grammar_compiles_demoted),
    ("grammar_workers_died", "Grammar compile workers that died while compiling (503s)",
     lambda g: g.grammar_workers_died),
)


class StatsCollector(Collector):
    """Yields gauges and counters from the latest snapshot handed over by ``ServerMetrics.render``."""

    def __init__(self) -> None:
        self.stats: EngineStats | None = None

    def collect(self) -> Iterator[Metric]:
        e = self.stats
        if e is None:
            return
        s = e.scheduler
        for name, doc, read in _SCHEDULER_GAUGES:
            yield GaugeMetricFamily(f"{PREFIX}_{name}", doc, value=float(read(s)))
        for name, doc, read in _SCHEDULER_COUNTERS:
            yield CounterMetricFamily(f"{PREFIX}_{name}", doc, value=float(read(s)))
        yield CounterMetricFamily(f"{PREFIX}_failed_steps", "Model steps that raised (their requests failed)",
                                  value=float(e.num_failed_steps))
        for key in PIN_COUNTER_NAMES:
            yield CounterMetricFamily(f"{PREFIX}_pins_{key}", f"CONTINUUM pins {key}", value=float(getattr(s.pins, key)))
        if e.job_inference is not None:
            yield from _inference_metrics(e.job_inference)
        yield from _tier_metrics(s.tier, e.tier_store)
        for name, doc, grammar in _GRAMMAR_COUNTERS:
            yield CounterMetricFamily(f"{PREFIX}_{name}", doc, value=float(grammar(e.grammar)))
        yield CounterMetricFamily(f"{PREFIX}_pinned_block_seconds", "Block-seconds held by pins",
                                  value=float(s.pinned_block_seconds))
        yield CounterMetricFamily(f"{PREFIX}_soft_pinned_block_seconds", "Block-seconds held by soft pin tails",
                                  value=float(s.soft_block_seconds))


def _inference_metrics(stats: InferenceStats) -> Iterator[Metric]:
    for f in fields(stats):
        family = GaugeMetricFamily if f.name == "indexed_jobs" else CounterMetricFamily
        yield family(f"{PREFIX}_job_inference_{f.name}", f"Job inference from the prefix chain: {f.name}",
                     value=float(getattr(stats, f.name)))


def _tier_metrics(tier: TierStats | None, store: TierStoreStats | None) -> Iterator[Metric]:
    if tier is not None:
        for name, doc, read in _TIER_GAUGES:
            yield GaugeMetricFamily(f"{PREFIX}_kv_tier_{name}", doc, value=float(read(tier)))
    if store is not None:
        for name, doc, read_store in _STORE_GAUGES:
            yield GaugeMetricFamily(f"{PREFIX}_kv_tier_{name}", doc, value=float(read_store(store)))
    if tier is not None:
        for name, doc, read in _TIER_COUNTERS:
            yield CounterMetricFamily(f"{PREFIX}_kv_tier_{name}", doc, value=float(read(tier)))
    if store is not None:
        for name, doc, read_store in _STORE_COUNTERS:
            yield CounterMetricFamily(f"{PREFIX}_kv_tier_{name}", doc, value=float(read_store(store)))
