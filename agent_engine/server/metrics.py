"""Prometheus metrics of one server app, in its own ``CollectorRegistry``.

Invariants:
- Each ``ServerMetrics`` owns a private registry, so several apps in one process never collide.
- Latency histograms and counters are fed from the engine thread (``on_output``/``on_abort`` are
  ``AsyncEngine`` listeners; prometheus-client is thread-safe); the engine is never touched here.
- Gauges and cumulative engine counters come from an ``engine.stats()`` snapshot that the caller took
  on the engine thread and passes to ``render`` at scrape time.
- No series carries a job id (ids are client data and unbounded): per-job turn counts are kept
  internally for at most ``max_tracked_jobs`` jobs (oldest dropped first) and observed in a histogram
  when the client releases the job.
- Every request-level series carries a ``tenant`` label (the API-key tenant's name, ``default``
  without keys; never a key). ``render(stats, tenant=...)`` shows one tenant only its own series
  (engine-wide gauges and counters are for admins: ``server.auth.metrics_viewer``).
- Turns, pins made and pins hit are counted per ``hint_source`` (where the job came from: the
  ``server.hints`` source names, ``inferred`` or ``none``), so a session convention that does not
  reach the scheduler shows as turns without pins.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from agent_engine.engine.outputs import RequestOutput

# The server package's only import of the pin counter names: repoint this line when they move.
from scheduler.job_hints import job_tenant
from scheduler.job_table import MAX_JOBS
from scheduler.policy import PIN_COUNTER_NAMES

PREFIX = "agent_engine"
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                    2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
_GAUGES = {
    "num_running": ("requests_running", "Requests currently running in the engine"),
    "num_waiting": ("requests_waiting", "Requests waiting to be scheduled"),
    "blocks_in_use": ("kv_blocks_in_use", "KV blocks referenced by requests"),
    "blocks_cached_free": ("kv_blocks_cached_free", "Free KV blocks that still hold a cached prefix"),
    "blocks_empty": ("kv_blocks_empty", "Free KV blocks without cached content"),
    "blocks_pinned": ("kv_blocks_pinned", "Distinct KV blocks held by CONTINUUM pins (a shared prefix once)"),
    "pin_block_refs": ("kv_pin_block_refs", "Pinned blocks as the pin cap counts them (once per job holding one)"),
    "blocks_soft": ("kv_blocks_soft_pinned", "KV blocks held by CONTINUUM soft pin tails (past the cap)"),
    "num_pinned_jobs": ("pinned_jobs", "Jobs holding a pin now"),
    "num_blocks": ("kv_blocks_total", "Usable KV blocks in the pool"),
}
_COUNTERS = {
    "prefix_query_tokens": ("prefix_cache_queried_tokens", "Prompt tokens looked up in the prefix cache"),
    "prefix_hit_tokens": ("prefix_cache_hit_tokens", "Prompt tokens found in the prefix cache"),
    "num_preemptions": ("preemptions", "Requests preempted for lack of KV blocks"),
    "num_failed_steps": ("failed_steps", "Model steps that raised (their requests failed)"),
}


class _StatsCollector(Collector):
    """Yields gauges/counters from the latest stats snapshot handed over by ``render``."""

    def __init__(self) -> None:
        self.stats: dict[str, Any] = {}

    def collect(self) -> Iterator[Metric]:
        s = self.stats
        for key, (name, doc) in _GAUGES.items():
            if key in s:
                yield GaugeMetricFamily(f"{PREFIX}_{name}", doc, value=float(s[key]))
        for key, (name, doc) in _COUNTERS.items():
            if key in s:
                yield CounterMetricFamily(f"{PREFIX}_{name}", doc, value=float(s[key]))
        pins = s.get("pins") or {}
        for key in PIN_COUNTER_NAMES:
            if key in pins:
                yield CounterMetricFamily(f"{PREFIX}_pins_{key}", f"CONTINUUM pins {key}",
                                          value=float(pins[key]))
        for key, value in (s.get("job_inference") or {}).items():
            family = GaugeMetricFamily if key == "indexed_jobs" else CounterMetricFamily
            yield family(f"{PREFIX}_job_inference_{key}", f"Job inference from the prefix chain: {key}",
                         value=float(value))
        yield from _tier_metrics(s.get("tier") or {})
        grammar = s.get("structured_outputs") or {}
        for key, doc in _GRAMMAR_COUNTERS.items():
            if key in grammar:
                yield CounterMetricFamily(f"{PREFIX}_{key}", doc, value=float(grammar[key]))
        pbs = s.get("pinned_block_seconds", pins.get("pinned_block_seconds"))
        if pbs is not None:
            yield CounterMetricFamily(f"{PREFIX}_pinned_block_seconds", "Block-seconds held by pins",
                                      value=float(pbs))
        sbs = s.get("soft_block_seconds", pins.get("soft_block_seconds"))
        if sbs is not None:
            yield CounterMetricFamily(f"{PREFIX}_soft_pinned_block_seconds",
                                      "Block-seconds held by soft pin tails",
                                      value=float(sbs))


_TIER_GAUGES = {"blocks": "KV blocks held in the second tier", "capacity_blocks": "KV blocks the second tier holds at most",
                "bytes": "Bytes of host memory the second tier takes"}
_TIER_COUNTERS = {"stored": "Blocks demoted into the second tier", "reloaded": "Blocks loaded back from the second tier",
                  "prefetched": "Blocks loaded back ahead of their job's predicted return (part of reloaded)",
                  "dropped": "Second-tier entries evicted (for room, or their job ended)",
                  "refused": "Evicted blocks not demoted (worthless, or every entry worth more)",
                  "cleared": "Second-tier entries forgotten by a prefix-cache reset",
                  "hit_tokens": "Prompt tokens served by a lookup's loads from the second tier",
                  "load_seconds": "Seconds spent loading blocks back from the second tier",
                  "save_seconds": "Seconds spent copying blocks into the second tier"}


_GRAMMAR_COUNTERS = {"grammar_cache_misses": "Output formats compiled (not found in the grammar cache)",
                     "grammar_compile_seconds": "Seconds spent compiling output formats in the server process",
                     "grammar_compiles_timed_out": "Trial compiles killed at --grammar-compile-timeout (400s)",
                     "grammar_compiles_cancelled": "Trial compiles killed because their client went away",
                     "grammar_compiles_demoted": "Fast-lane trial compiles stopped at its budget (then tried on the main lane)",
                     "grammar_workers_died": "Grammar compile workers that died while compiling (503s)"}


def _tier_metrics(tier: dict[str, Any]) -> Iterator[Metric]:
    for key, doc in _TIER_GAUGES.items():
        if key in tier:
            yield GaugeMetricFamily(f"{PREFIX}_kv_tier_{key}", doc, value=float(tier[key]))
    for key, doc in _TIER_COUNTERS.items():
        if key in tier:
            yield CounterMetricFamily(f"{PREFIX}_kv_tier_{key}", doc, value=float(tier[key]))


class ServerMetrics:
    """The metrics of one app. Hook ``on_output``/``on_abort`` into ``AsyncEngine`` listeners."""

    def __init__(self, max_tracked_jobs: int = MAX_JOBS) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        t = ["tenant"]
        self.ttft = Histogram(f"{PREFIX}_time_to_first_token_seconds", "Arrival to first token", t,
                              buckets=_LATENCY_BUCKETS, registry=r)
        self.itl = Histogram(f"{PREFIX}_inter_token_latency_seconds", "Gap between consecutive tokens", t,
                             buckets=_LATENCY_BUCKETS, registry=r)
        self.e2e = Histogram(f"{PREFIX}_e2e_request_latency_seconds", "Arrival to finish", t,
                             buckets=_LATENCY_BUCKETS, registry=r)
        self.finished = Counter(f"{PREFIX}_requests_finished", "Finished requests by finish reason",
                                ["finish_reason", *t], registry=r)
        self.prompt_tokens = Counter(f"{PREFIX}_prompt_tokens", "Prompt tokens of finished requests", t,
                                     registry=r)
        self.generation_tokens = Counter(f"{PREFIX}_generation_tokens", "Generated tokens", t, registry=r)
        self.turns_by_source = Counter(f"{PREFIX}_job_turns_by_hint", "Finished turns of jobs by hint source",
                                       ["hint_source", *t], registry=r)
        self.pins_by_source = Counter(f"{PREFIX}_pins_made_by_hint", "Finished turns pinned, by hint source",
                                      ["hint_source", *t], registry=r)
        self.pin_hits_by_source = Counter(f"{PREFIX}_pin_hits_by_hint",
                                          "Turns admitted onto their job's pin, by hint source",
                                          ["hint_source", *t], registry=r)
        self.job_turns_at_release = Histogram(f"{PREFIX}_job_turns_at_release",
                                              "Turns of a job when released", t,
                                              buckets=(1, 2, 3, 5, 8, 13, 21, 34, 55, 89), registry=r)
        self.jobs_released = Counter(f"{PREFIX}_jobs_released", "DELETE /v1/jobs calls", t, registry=r)
        self.job_jct = Histogram(f"{PREFIX}_job_completion_seconds",
                                 "Job completion time: first turn's arrival to the last step's finish", t,
                                 buckets=_LATENCY_BUCKETS + (160.0, 320.0, 640.0, 1280.0), registry=r)
        self.http_requests = Counter(f"{PREFIX}_http_requests", "HTTP requests by route template and status class",
                                     ["route", "status", *t], registry=r)
        for series in (self.ttft, self.itl, self.e2e, self.prompt_tokens, self.generation_tokens,
                       self.job_turns_at_release, self.jobs_released, self.job_jct):
            series.labels(tenant_label(None))  # the default tenant's series exist (at 0) from the start
        self._stats = _StatsCollector()
        r.register(self._stats)
        self._lock = threading.Lock()
        self._last_token_time: dict[str, float] = {}
        self._turns: OrderedDict[str, int] = OrderedDict()
        self._max_jobs = max_tracked_jobs

    # ---- engine-thread listeners ------------------------------------------------------------------
    def on_output(self, out: RequestOutput, now: float) -> None:
        rid, tenant = out.request_id, tenant_label(out.tenant)
        if out.new_token_ids:
            prev = self._last_token_time.get(rid)
            if prev is not None:
                gap = (now - prev) / len(out.new_token_ids)
                itl = self.itl.labels(tenant)
                for _ in out.new_token_ids:
                    itl.observe(gap)
            self._last_token_time[rid] = now
            self.generation_tokens.labels(tenant).inc(len(out.new_token_ids))
        if not out.finished:
            return
        self._last_token_time.pop(rid, None)
        reason = out.outputs[0].finish_reason or "unknown"
        self.finished.labels(reason, tenant).inc()
        self.prompt_tokens.labels(tenant).inc(len(out.prompt_token_ids))
        m = out.metrics
        if m is not None:
            if m.first_token_time is not None:
                self.ttft.labels(tenant).observe(max(0.0, m.first_token_time - m.arrival_time))
            end = m.finished_time if m.finished_time is not None else now
            self.e2e.labels(tenant).observe(max(0.0, end - m.arrival_time))
        if out.job_id is not None:
            self._count_turn(out.job_id, out, tenant)

    def on_job_finished(self, job_id: str, turns: int, jct_seconds: float) -> None:
        """Engine-thread listener: a job's last step finished (or the client released the job)."""
        self.job_jct.labels(tenant_label(job_tenant(job_id))).observe(jct_seconds)

    def on_abort(self, request_id: str, tenant: str | None = None) -> None:
        self._last_token_time.pop(request_id, None)
        self.finished.labels("abort", tenant_label(tenant)).inc()

    # ---- event-loop side --------------------------------------------------------------------------
    def on_job_released(self, job_id: str, tenant: str | None = None) -> None:
        self.jobs_released.labels(tenant_label(tenant)).inc()
        with self._lock:
            turns = self._turns.pop(job_id, None)
        if turns is not None:
            self.job_turns_at_release.labels(tenant_label(tenant)).observe(turns)

    def render(self, stats: dict[str, Any], tenant: str | None = None, sees_all: bool = True) -> bytes:
        """Prometheus text exposition with gauges from ``stats`` (a snapshot from the engine thread):
        every series, or (``sees_all`` False) only ``tenant``'s own."""
        self._stats.stats = stats
        if sees_all:
            return generate_latest(self.registry)
        return generate_latest(_TenantView(self.registry, tenant_label(tenant)))  # type: ignore[arg-type]

    def _count_turn(self, job_id: str, out: RequestOutput, tenant: str) -> None:
        source = out.hint_source
        self.turns_by_source.labels(source, tenant).inc()
        if out.pinned:
            self.pins_by_source.labels(source, tenant).inc()
        if out.pin_hit:
            self.pin_hits_by_source.labels(source, tenant).inc()
        with self._lock:
            self._turns[job_id] = self._turns.pop(job_id, 0) + 1
            if len(self._turns) > self._max_jobs:
                self._turns.popitem(last=False)


def tenant_label(tenant: str | None) -> str:
    """A tenant's label value: its name, or ``default`` for the one tenant of a server without keys."""
    return tenant or "default"


class _TenantView:
    """A registry view holding only the samples labelled ``tenant``; families without them are left out."""

    def __init__(self, registry: CollectorRegistry, tenant: str) -> None:
        self.registry = registry
        self.tenant = tenant

    def collect(self) -> Iterator[Metric]:
        for family in self.registry.collect():
            samples = [x for x in family.samples if x.labels.get("tenant") == self.tenant]
            if samples:
                view = Metric(family.name, family.documentation, family.type, family.unit)
                view.samples = samples
                yield view


class HttpCounterMiddleware:
    """Counts every HTTP request by route template and status class (``2xx``...), never by raw path
    (a path holds client data, e.g. a job id). Unmatched paths count as ``other``."""

    def __init__(self, app: Any, metrics: ServerMetrics) -> None:
        self.app = app
        self.counter = metrics.http_requests

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = [500]

        async def counting_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            route = getattr(scope.get("route"), "path", None) or "other"
            tenant = (scope.get("state") or {}).get("tenant")
            self.counter.labels(route, f"{status[0] // 100}xx", tenant_label(tenant)).inc()
