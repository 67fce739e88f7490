"""Shortest remaining (estimated) time first, with aging.

The key of an item is ``remaining_cost / contribution - aging_rate * waited``: the query with the
least estimated remaining LLM work runs first (fused work counts once for every query waiting on
it), and every second of waiting lowers the key by ``aging_rate`` cost units, so a long query's
wait is bounded: it overtakes any newcomer once it has waited ``(its cost - theirs) / aging_rate``.
"""

from __future__ import annotations

from duckdb_sem.scheduler.policies.base import Policy, QueuedSEU

__all__ = ["SRTF"]


class SRTF(Policy):
    name = "srtf"

    def __init__(self, *, aging_rate: float = 0.0) -> None:
        if aging_rate < 0:
            raise ValueError("aging_rate must be >= 0")
        self.aging_rate = aging_rate
        self._items: list[QueuedSEU] = []

    def key(self, item: QueuedSEU, now: float) -> tuple[float, float, int]:
        waited = max(0.0, now - item.arrival)
        score = item.remaining_cost / max(item.contribution, 1e-9) - self.aging_rate * waited
        return (score, item.query_arrival, item.seq)

    def push(self, item: QueuedSEU) -> None:
        self._items.append(item)

    def pop(self, now: float) -> QueuedSEU | None:
        if not self._items:
            return None
        best = min(self._items, key=lambda i: self.key(i, now))
        self._items.remove(best)
        return best

    def remove(self, item: QueuedSEU) -> None:
        if item in self._items:
            self._items.remove(item)

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> list[QueuedSEU]:
        return list(self._items)
