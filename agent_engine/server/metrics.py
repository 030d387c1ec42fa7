"""Prometheus metrics of one server app, in its own ``CollectorRegistry``.

Invariants:
- Each ``ServerMetrics`` owns a private registry, so several apps in one process never collide.
- Latency histograms and counters are fed from the engine thread (``on_output``/``on_abort`` are
  ``AsyncEngine`` listeners; prometheus-client is thread-safe); the engine is never touched here.
- Gauges and cumulative engine counters come from a typed ``EngineStats`` snapshot that the caller
  took on the engine thread and passes to ``render`` at scrape time (``stats_metrics``).
- No series carries a job id (ids are client data and unbounded), and nothing here keeps a per-job
  count: a job's end reaches the metrics from the engine's job table (``job_ends``, a listener told
  after the estimator), with its turns and completion time as the estimator wrote them on the job's
  record (``JobRecord.completion``) and its tenant as the record's own field (never parsed out of the
  id); a job the client released also observes its turns (``job_turns_at_release``).
- Every request-level series carries a ``tenant`` label (the API-key tenant's name, ``default``
  without keys; never a key). ``render(stats, tenant=...)`` shows one tenant only its own series
  (engine-wide gauges and counters are for admins: ``server.auth.metrics_viewer``).
- Turns, pins made and pins hit are counted per ``hint_source`` (where the job came from: the
  ``server.hints`` source names, ``inferred`` or ``none``), so a session convention that does not
  reach the scheduler shows as turns without pins.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import Metric
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_engine.engine.engine_stats import EngineStats
from agent_engine.engine.outputs import RequestOutput
from agent_engine.server.stats_metrics import PIN_COUNTER_NAMES, PREFIX, StatsCollector
from scheduler import JobListener, JobRecord, Request

__all__ = ["PIN_COUNTER_NAMES", "PREFIX", "HttpCounterMiddleware", "JobEndMetrics", "ServerMetrics", "tenant_label"]

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                    2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)


class JobEndMetrics(JobListener):
    """The metrics' listener of the engine's job table: each job an event ended (the record's
    ``completion``, written by the estimator, which is told first) observes its completion time under
    the record's tenant; a release also observes the job's turns."""

    def __init__(self, jct: Histogram, turns_at_release: Histogram) -> None:
        self.jct = jct
        self.turns_at_release = turns_at_release

    def on_turn_end(self, record: JobRecord, request: Request, now: float) -> None:
        self._ended(record)

    def on_turn_abort(self, record: JobRecord, request: Request, now: float) -> None:
        self._ended(record)

    def on_job_release(self, record: JobRecord, now: float) -> None:
        if record.completion is not None:
            self.turns_at_release.labels(tenant_label(record.tenant)).observe(record.completion.turns)
        self._ended(record)

    def on_job_abandon(self, record: JobRecord, now: float) -> None:
        self._ended(record)

    def _ended(self, record: JobRecord) -> None:
        if record.completion is not None:
            self.jct.labels(tenant_label(record.tenant)).observe(record.completion.jct)


class ServerMetrics:
    """The metrics of one app. Hook ``on_output``/``on_abort`` into ``AsyncEngine`` listeners."""

    def __init__(self) -> None:
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
        self._stats = StatsCollector()
        r.register(self._stats)
        self._last_token_time: dict[str, float] = {}
        self.job_ends = JobEndMetrics(self.job_jct, self.job_turns_at_release)

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
            self._count_turn(out, tenant)

    def on_abort(self, request_id: str, tenant: str | None = None) -> None:
        self._last_token_time.pop(request_id, None)
        self.finished.labels("abort", tenant_label(tenant)).inc()

    # ---- event-loop side --------------------------------------------------------------------------
    def on_job_released(self, tenant: str | None = None) -> None:
        """A client released a job (``DELETE /v1/jobs``); its turns reach ``job_ends`` from the engine."""
        self.jobs_released.labels(tenant_label(tenant)).inc()

    def render(self, stats: EngineStats | None, tenant: str | None = None, sees_all: bool = True) -> bytes:
        """Prometheus text exposition with gauges from ``stats`` (a snapshot from the engine thread; None:
        none taken yet): every series, or (``sees_all`` False) only ``tenant``'s own."""
        self._stats.stats = stats
        if sees_all:
            return generate_latest(self.registry)
        return generate_latest(_TenantView(self.registry, tenant_label(tenant)))  # type: ignore[arg-type]

    def _count_turn(self, out: RequestOutput, tenant: str) -> None:
        source = out.hint_source
        self.turns_by_source.labels(source, tenant).inc()
        if out.pinned:
            self.pins_by_source.labels(source, tenant).inc()
        if out.pin_hit:
            self.pin_hits_by_source.labels(source, tenant).inc()


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

    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app = app
        self.counter = metrics.http_requests

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = [500]

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            route = getattr(scope.get("route"), "path", None) or "other"
            tenant = (scope.get("state") or {}).get("tenant")
            self.counter.labels(route, f"{status[0] // 100}xx", tenant_label(tenant)).inc()
