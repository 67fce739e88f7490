"""First come, first served: SEUs run in the order they were queued."""

from __future__ import annotations

from duckdb_sem.scheduler.policies.base import Policy, QueuedSEU

__all__ = ["FCFS"]


class FCFS(Policy):
    name = "fcfs"

    def __init__(self) -> None:
        self._items: list[QueuedSEU] = []

    def push(self, item: QueuedSEU) -> None:
        self._items.append(item)

    def pop(self, now: float) -> QueuedSEU | None:
        if not self._items:
            return None
        best = min(self._items, key=lambda i: (i.query_arrival, i.seq))
        self._items.remove(best)
        return best

    def remove(self, item: QueuedSEU) -> None:
        if item in self._items:
            self._items.remove(item)

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> list[QueuedSEU]:
        return list(self._items)
