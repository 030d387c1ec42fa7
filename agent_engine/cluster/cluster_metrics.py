"""The ingress's ``/metrics``: every replica's own metrics, labelled ``replica``, plus the router's.

Each replica serves the single server's metrics (``server.metrics``); the ingress scrapes all of them
and merges the families (``merge_expositions``): one family per name, each sample with a
``replica="<id>"`` label in front of its own labels. The ingress adds its own series: the router's
decision counters (``agent_engine_router_decisions_total{decision=...}``), retries of requests whose
replica died before they answered, streams cut by a dying replica, and the live replica count.

Invariants: a replica that does not answer a scrape is left out (its series vanish until it answers
again) and counted in ``agent_engine_cluster_scrape_failures_total``; no series carries a job id.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

PREFIX = "agent_engine"
REPLICA_LABEL = "replica"


def merge_expositions(texts: Mapping[str, str], label: str = REPLICA_LABEL) -> list[Metric]:
    """The metric families of every replica's exposition text, each sample labelled ``label=<replica>``."""
    families: dict[str, Metric] = {}
    for replica, text in texts.items():
        for fam in text_string_to_metric_families(text):
            out = families.get(fam.name)
            if out is None:
                out = families[fam.name] = Metric(fam.name, fam.documentation, fam.type, fam.unit)
            for s in fam.samples:
                out.samples.append(s._replace(labels={label: replica, **s.labels}))
    return list(families.values())


class _Families(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        yield from self.families


class _RouterCollector(Collector):
    """The router's counters and view, read at scrape time from ``source()``."""

    def __init__(self, source: Callable[[], tuple[dict[str, int], int]]) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        counters, replicas = self.source()
        fam = CounterMetricFamily(f"{PREFIX}_router_decisions", "Routing decisions of the ingress's router",
                                  labels=["decision"])
        for name, value in sorted(counters.items()):
            fam.add_metric([name], float(value))
        yield fam
        yield GaugeMetricFamily(f"{PREFIX}_cluster_replicas", "Replicas the router can route to",
                                value=float(replicas))


class ClusterMetrics:
    """The ingress's own series; ``render`` adds the replicas' merged metrics."""

    def __init__(self, router_source: Callable[[], tuple[dict[str, int], int]]) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.retries = Counter(f"{PREFIX}_cluster_retries", "Requests resent after their replica died "
                               "before answering", registry=r)
        self.stream_errors = Counter(f"{PREFIX}_cluster_stream_errors", "Responses cut by a replica "
                                     "that died mid-stream (ended with an error event)", registry=r)
        self.scrape_failures = Counter(f"{PREFIX}_cluster_scrape_failures", "Replica metric scrapes "
                                       "that failed", registry=r)
        r.register(_RouterCollector(router_source))

    def render(self, replica_texts: Mapping[str, str]) -> bytes:
        """Prometheus text: the ingress's series, then every replica's, labelled."""
        merged = CollectorRegistry()
        merged.register(_Families(merge_expositions(replica_texts)))
        return generate_latest(self.registry) + generate_latest(merged)
