"""Shortest remaining (estimated) time first, with aging (SeqoFlow's scheduler).

The key of an item is ``remaining_cost / contribution - aging_rate * waited``: the query with the
least estimated remaining LLM work runs first (fused work counts once for every query waiting on
it), and every second an SEU waits lowers its key by ``aging_rate`` cost units. Since every
competitor's key falls at the same rate, an item X queued at ``t0`` with cost ``c`` loses only to
items that arrived before ``t0 + c / aging_rate``: its wait is bounded by the work of those, so a
long query cannot starve (``tests/scheduler/test_bounded_wait.py`` checks this property).
With ``aging_rate=0`` it is plain SRTF, which can starve long queries.
"""

from __future__ import annotations

from duckdb_sem.scheduler.policies.base import KeyedPolicy, QueuedSEU

__all__ = ["DEFAULT_AGING_RATE", "SRTF", "aged_rank"]

#: cost units (estimated tokens) per second of waiting; ``DUCKDB_SEM_AGING_RATE`` overrides it
DEFAULT_AGING_RATE = 100.0


class SRTF(KeyedPolicy):
    name = "srtf"

    def __init__(self, *, aging_rate: float = DEFAULT_AGING_RATE) -> None:
        super().__init__()
        if aging_rate < 0:
            raise ValueError("aging_rate must be >= 0")
        self.aging_rate = aging_rate

    def key(self, item: QueuedSEU, now: float) -> float:
        """The priority at ``now``: ``effective_cost - aging_rate * waited`` (smaller first)."""
        return item.effective_cost - self.aging_rate * max(0.0, now - item.arrival)

    def rank(self, item: QueuedSEU) -> tuple[float, ...]:
        # key(item, now) + aging_rate * now: the same order at every time, fixed once queued
        return (aged_rank(item, self.aging_rate),)


def aged_rank(item: QueuedSEU, rate: float) -> float:
    """``effective_cost + rate * arrival``: ordered as ``effective_cost - rate * waited``."""
    return item.effective_cost + rate * item.arrival
