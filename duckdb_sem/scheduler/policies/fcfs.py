"""First come, first served: queries run in the order they arrived, SEU after SEU.

A query that arrived first keeps precedence for all its later SEUs, so FCFS behaves like
run-to-completion at query granularity (the classic head-of-line blocking baseline).
"""

from __future__ import annotations

from duckdb_sem.scheduler.policies.base import KeyedPolicy, QueuedSEU

__all__ = ["FCFS"]


class FCFS(KeyedPolicy):
    name = "fcfs"

    def rank(self, item: QueuedSEU) -> tuple[float, ...]:
        return (item.query_arrival,)
