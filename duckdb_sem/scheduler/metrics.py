"""Prometheus exposition of a scheduler status snapshot (``GET /metrics``).

The sidecar keeps its own state (:meth:`Scheduler.status`); this module only maps a snapshot
onto metric families and lets ``prometheus_client`` write the text format (escaping, counter
``_total`` suffixes, float formatting), so every scrape reads one consistent snapshot.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["render_metrics"]

_KINDS = ("virtual", "physical", "fused", "cache")


class _Snapshot(Collector):
    def __init__(self, status: Mapping[str, Any]) -> None:
        self.status = status

    def collect(self) -> Iterator[Metric]:
        s = self.status
        info = GaugeMetricFamily(
            "duckdb_sem_info",
            "Scheduler identity (SIMULATED when simulated=true).",
            labels=["backend_id", "policy", "simulated"],
        )
        info.add_metric([str(s["backend_id"]), str(s["policy"]), str(s["simulated"]).lower()], 1)
        yield info
        yield GaugeMetricFamily(
            "duckdb_sem_queue_length", "SEUs waiting in the policy queue.", s["queue_length"]
        )
        yield GaugeMetricFamily(
            "duckdb_sem_queued_requests",
            "Requests waiting in the policy queue.",
            s["queued_requests"],
        )
        for key, name, help_ in (
            ("requests_in_flight", "in_flight_requests",
             "Requests dispatched to a replica and not answered."),
            ("tokens_in_flight", "in_flight_tokens", "Estimated tokens in flight per replica."),
        ):  # fmt: skip
            family = GaugeMetricFamily(f"duckdb_sem_{name}", help_, labels=["replica"])
            for r in s["replicas"]:
                family.add_metric([str(r["replica"])], r[key])
            yield family
        yield GaugeMetricFamily(
            "duckdb_sem_tokens_per_second",
            "Physical tokens answered per second (10 s window).",
            s["tokens_per_s"],
        )
        remaining = GaugeMetricFamily(
            "duckdb_sem_query_remaining_cost",
            "Estimated remaining LLM cost (tokens) per live query.",
            labels=["query_id", "connection"],
        )
        attained = GaugeMetricFamily(
            "duckdb_sem_query_attained_tokens",
            "Estimated tokens dispatched per live query.",
            labels=["query_id"],
        )
        for q in s["queries"]:
            remaining.add_metric([str(q["query_id"]), str(q["connection"])], q["remaining_cost"])
            attained.add_metric([str(q["query_id"])], q["attained_tokens"])
        yield remaining
        yield attained
        usage = s["usage"]
        for unit in ("calls", "tokens"):
            counter = CounterMetricFamily(
                f"duckdb_sem_{unit}",
                f"LLM {'requests' if unit == 'calls' else 'tokens'} by how they were served "
                "(virtual = all asked).",
                labels=["kind"],
            )
            for kind in _KINDS:
                counter.add_metric([kind], usage[f"{kind}_{unit}"])
            yield counter


def render_metrics(status: Mapping[str, Any]) -> str:
    """The Prometheus text format of ``status`` (a :meth:`Scheduler.status` snapshot)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(status))
    return generate_latest(registry).decode()
