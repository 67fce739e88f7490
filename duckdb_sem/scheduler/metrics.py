"""Prometheus text exposition of a scheduler status snapshot (``GET /metrics``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["render_metrics"]


def _label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def render_metrics(status: Mapping[str, Any]) -> str:
    out: list[str] = []

    def metric(name: str, kind: str, help_: str, samples: list[tuple[str, float]]) -> None:
        out.append(f"# HELP duckdb_sem_{name} {help_}")
        out.append(f"# TYPE duckdb_sem_{name} {kind}")
        for labels, value in samples:
            out.append(f"duckdb_sem_{name}{labels} {value}")

    info = (
        f'{{backend_id="{_label(status["backend_id"])}",policy="{_label(status["policy"])}",'
        f'simulated="{str(status["simulated"]).lower()}"}}'
    )
    metric("info", "gauge", "Scheduler identity (SIMULATED when simulated=true).", [(info, 1)])
    metric(
        "queue_length", "gauge", "SEUs waiting in the policy queue.", [("", status["queue_length"])]
    )
    metric(
        "queued_requests",
        "gauge",
        "Requests waiting in the policy queue.",
        [("", status["queued_requests"])],
    )
    replicas = status["replicas"]
    metric(
        "in_flight_requests",
        "gauge",
        "Requests dispatched to a replica and not answered.",
        [(f'{{replica="{r["replica"]}"}}', r["requests_in_flight"]) for r in replicas],
    )
    metric(
        "in_flight_tokens",
        "gauge",
        "Estimated tokens in flight per replica.",
        [(f'{{replica="{r["replica"]}"}}', r["tokens_in_flight"]) for r in replicas],
    )
    metric(
        "tokens_per_second",
        "gauge",
        "Physical tokens answered per second (10 s window).",
        [("", status["tokens_per_s"])],
    )
    queries = status["queries"]
    metric(
        "query_remaining_cost",
        "gauge",
        "Estimated remaining LLM cost (tokens) per live query.",
        [
            (
                f'{{query_id="{_label(q["query_id"])}",connection="{_label(q["connection"])}"}}',
                q["remaining_cost"],
            )
            for q in queries
        ],
    )
    metric(
        "query_attained_tokens",
        "gauge",
        "Estimated tokens dispatched per live query.",
        [(f'{{query_id="{_label(q["query_id"])}"}}', q["attained_tokens"]) for q in queries],
    )
    usage = status["usage"]
    kinds = ("virtual", "physical", "fused", "cache")
    metric(
        "calls_total",
        "counter",
        "LLM requests by how they were served (virtual = all asked).",
        [(f'{{kind="{k}"}}', usage[f"{k}_calls"]) for k in kinds],
    )
    metric(
        "tokens_total",
        "counter",
        "LLM tokens by how they were served (virtual = all asked).",
        [(f'{{kind="{k}"}}', usage[f"{k}_tokens"]) for k in kinds],
    )
    return "\n".join(out) + "\n"
