"""What the engine reports about itself, as typed values: one frozen snapshot per source.

``EngineStats`` is one ``LLMEngine.stats()`` snapshot, taken on the engine thread: the scheduler's
(``scheduler.SchedulerStats``: queues, the KV pool, pins, the second tier's index), the runner's host
store of that tier (``TierStoreStats``), the estimators' (``JobStats``), the output grammars'
(``GrammarStats``), job inference's (``InferenceStats``) and the engine's own counters. A reader (the
server's metrics, the final account, tests) names fields, never string keys; ``as_dict`` is the JSON
form (the final account's log line). ``RoutingStats`` is what a replica's router asks of its engine.

Invariants: every value here is frozen and holds no reference into the engine (a snapshot stays
true to its moment while the engine goes on); a source that is absent (no second tier, no job
inference) is None, never a value of zeros.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from scheduler import SchedulerStats

__all__ = ["EngineStats", "GrammarStats", "InferenceStats", "JobStats", "RoutingStats", "TierStoreStats"]


@dataclass(frozen=True)
class TierStoreStats:
    """The model runner's host store of the second KV tier: its size, copy times and element type."""

    bytes: int
    load_seconds: float  # spent loading blocks back into the pool
    save_seconds: float  # spent copying blocks into the store
    dtype: str


@dataclass(frozen=True)
class GrammarStats:
    """Output constraints: requests constrained now, the grammar cache, compile time and the trial
    compiles' fates (``grammar_workers``)."""

    constrained_requests: int = 0
    grammar_cache_size: int = 0
    grammar_cache_hits: int = 0
    grammar_cache_misses: int = 0
    grammar_cache_evictions: int = 0
    grammar_compile_seconds: float = 0.0
    grammar_compiles_timed_out: int = 0
    grammar_compiles_cancelled: int = 0
    grammar_compiles_demoted: int = 0
    grammar_workers_died: int = 0


@dataclass(frozen=True)
class InferenceStats:
    """Job inference from the prefix chain (``scheduler.job_index.JobInferenceStats``) and the jobs
    indexed now."""

    joins: int = 0
    weak_joins: int = 0
    new_jobs: int = 0
    matched_tokens: int = 0
    forgotten: int = 0
    indexed_jobs: int = 0


@dataclass(frozen=True)
class JobStats:
    """The estimators' jobs: live ones, tenants with an estimator of their own, finished jobs and their
    summed completion time, and the default estimator's counters and model state (its ``snapshot``)."""

    jobs_active: int = 0
    estimator_tenants: int = 0
    jobs_finished: int = 0
    jct_sum_seconds: float = 0.0
    estimator: tuple[tuple[str, float | int | str], ...] = ()

    @classmethod
    def of(cls, hooks_stats: dict[str, object]) -> JobStats:
        """From the job hooks' ``stats()`` (their one report; see ``JobHooks.stats``)."""
        estimator = hooks_stats.get("estimator")
        return cls(jobs_active=_int(hooks_stats.get("jobs_active")),
                   estimator_tenants=_int(hooks_stats.get("estimator_tenants")),
                   jobs_finished=_int(hooks_stats.get("jobs_finished")),
                   jct_sum_seconds=_float(hooks_stats.get("jct_sum_seconds")),
                   estimator=tuple(sorted(estimator.items())) if isinstance(estimator, dict) else ())


@dataclass(frozen=True)
class EngineStats:
    """One ``LLMEngine.stats()`` snapshot (see the module docstring)."""

    scheduler: SchedulerStats
    num_failed_steps: int
    max_model_len: int
    block_size: int
    jobs: JobStats = JobStats()
    grammar: GrammarStats = GrammarStats()
    tier_store: TierStoreStats | None = None  # None without a second KV tier
    job_inference: InferenceStats | None = None  # None unless the engine infers jobs

    def as_dict(self) -> dict[str, object]:
        """JSON-able: nested objects per source (the estimator's counters as an object)."""
        out = asdict(self)
        out["jobs"]["estimator"] = dict(self.jobs.estimator)
        return out


@dataclass(frozen=True)
class RoutingStats:
    """What a request router asks of a replica's engine: the jobs whose KV waits there (a lease, or
    blocks in the second tier), the jobs with a request there, free and usable blocks, queue lengths."""

    leases: tuple[str, ...]
    active_jobs: tuple[str, ...]
    free_blocks: int
    num_blocks: int
    num_waiting: int
    num_running: int


def _int(value: object) -> int:
    return int(value) if isinstance(value, int | float) else 0


def _float(value: object) -> float:
    return float(value) if isinstance(value, int | float) else 0.0
