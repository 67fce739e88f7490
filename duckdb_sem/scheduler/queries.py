"""The live queries a scheduler tracks, and its status snapshot.

A query is created by its first SEU, updated by each later one (remaining cost, operator, SEU
count) and forgotten by :func:`prune_idle` once it has nothing waiting or queued and has been
quiet for :data:`PRUNE_AFTER_S`, or :data:`DONE_SHOWN_S` after its run said it finished
(``Scheduler.finish_query``: shown as ``done`` until then). :func:`status_snapshot` is the JSON-able picture served at
``/v1/status`` and turned into Prometheus families by :mod:`.metrics`, e.g.::

    {"backend_id": "...", "policy": "srtf", "queue_length": 2, "queries": [...], ...}
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from duckdb_sem.scheduler.accounting import QueryState, Usage
from duckdb_sem.scheduler.admission import ReplicaState
from duckdb_sem.scheduler.policies import QueuedSEU
from duckdb_sem.scheduler.seu import SEU

__all__ = ["DONE_SHOWN_S", "PRUNE_AFTER_S", "prune_idle", "status_snapshot", "track_query"]

PRUNE_AFTER_S = 120.0  # forget idle queries after this long
DONE_SHOWN_S = 5.0  # a finished query stays in the status, as done, this long


def track_query(queries: dict[str, QueryState], seu: SEU, now: float) -> QueryState:
    """The state of the SEU's query, created on its first SEU and updated by this one."""
    state = queries.get(seu.query_id)
    if state is None:
        state = QueryState(seu.query_id, seu.connection, now, now, usage=Usage())
        queries[seu.query_id] = state
    state.last_seen = now
    state.done_at = None
    state.remaining_cost = seu.remaining_cost
    state.operator = seu.operator
    state.seus += 1
    return state


def prune_idle(queries: dict[str, QueryState], now: float) -> None:
    """Forget queries with nothing waiting or queued, quiet for :data:`PRUNE_AFTER_S` (or
    finished :data:`DONE_SHOWN_S` ago)."""
    for qid, state in list(queries.items()):
        if state.waiting or state.queued:
            continue
        done = state.done_at is not None and now - state.done_at > DONE_SHOWN_S
        if done or now - state.last_seen > PRUNE_AFTER_S:
            del queries[qid]


def status_snapshot(
    *,
    backend_id: str,
    simulated: bool,
    policy: str,
    uptime_s: float,
    queued: Sequence[QueuedSEU],
    replicas: Sequence[ReplicaState],
    tokens_per_s: float,
    queries: Iterable[QueryState],
    usage: Usage,
    now: float,
) -> dict[str, object]:
    """Replicas, queue (``queued`` in arrival order), live queries and usage, JSON-able."""
    return {
        "backend_id": backend_id,
        "simulated": simulated,
        "policy": policy,
        "uptime_s": round(uptime_s, 3),
        "queue_length": len(queued),
        "queued_requests": sum(i.size for i in queued),
        "in_flight_requests": sum(r.requests for r in replicas),
        "tokens_per_s": round(tokens_per_s, 1),
        "replicas": [r.as_dict() for r in replicas],
        "queries": [q.as_dict(now) for q in queries],
        "usage": usage.as_dict(),
    }
