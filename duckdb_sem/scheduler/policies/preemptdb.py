"""PreemptDB-style two classes: short queries preempt long ones at SEU boundaries.

A query whose estimated remaining cost is at most ``threshold`` is *short*; short SEUs always run
before long ones (strict priority), each class in arrival order. A long query is thus preempted
between two of its SEUs whenever short work is waiting, and resumes where it stopped. The
threshold is static (as in PreemptDB's fixed priority classes); ``joint`` derives it from the
queue instead.
"""

from __future__ import annotations

from duckdb_sem.scheduler.policies.base import KeyedPolicy, QueuedSEU

__all__ = ["PreemptDB"]


class PreemptDB(KeyedPolicy):
    name = "preemptdb"

    def __init__(self, *, threshold: float = 8192.0) -> None:
        super().__init__()
        if threshold < 0:
            raise ValueError("threshold must be >= 0")
        self.threshold = threshold

    def rank(self, item: QueuedSEU) -> tuple[float, ...]:
        long = item.effective_cost > self.threshold
        return (1.0 if long else 0.0, item.query_arrival)
