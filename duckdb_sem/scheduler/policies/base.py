"""The policy interface: which queued SEU runs next.

A policy orders :class:`QueuedSEU` items. It sees each item's query, arrival times, the query's
estimated remaining cost, the summed priority contribution of every query waiting on it
(fusion), and the service its query has attained so far. Policies are pure ordering: the
scheduler owns threads, backends, fusion and admission, and asks the policy only between SEUs,
so every preemption happens at an SEU boundary and no finished work is ever lost.

Most policies are a rank over the queue (:class:`KeyedPolicy`, a heap): the item with the
smallest rank runs next. Ties break on the query's arrival, then the item's sequence number, so
every order is deterministic.
"""

from __future__ import annotations

import abc
import heapq
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["KeyedPolicy", "Policy", "QueuedSEU"]

_ids = itertools.count()


@dataclass(eq=False)
class QueuedSEU:
    """One SEU's new work waiting in the scheduler's queue (mutable: fusion adds to it)."""

    query_id: str
    arrival: float  # when this SEU was queued (scheduler clock)
    query_arrival: float  # when its query submitted its first SEU
    remaining_cost: float  # the query's estimated remaining LLM cost (tokens), incl. this SEU
    size: int  # requests to run
    tokens: int = 0  # estimated tokens of those requests (prompt + output)
    contribution: float = 1.0  # summed over the queries waiting on it (priority summation)
    attained: float = 0.0  # tokens of service the query had when this SEU was queued
    operator: str = ""
    seq: int = field(default_factory=lambda: next(_ids))

    @property
    def effective_cost(self) -> float:
        """Remaining cost per waiting query: fused work shared by k queries counts k times."""
        return self.remaining_cost / max(self.contribution, 1e-9)


class Policy(abc.ABC):
    """Orders queued SEUs. Not thread-safe: the scheduler calls it under its lock."""

    name: str

    @abc.abstractmethod
    def push(self, item: QueuedSEU) -> None: ...

    @abc.abstractmethod
    def pop(self, now: float) -> QueuedSEU | None:
        """Remove and return the item to run next, or None when empty."""

    @abc.abstractmethod
    def remove(self, item: QueuedSEU) -> None: ...

    @abc.abstractmethod
    def __len__(self) -> int: ...

    @abc.abstractmethod
    def items(self) -> list[QueuedSEU]: ...

    def dispatched(self, item: QueuedSEU, now: float) -> None:  # noqa: B027 - optional hook
        """Called once the item popped last was really dispatched (admission accepted it)."""

    def update(self, item: QueuedSEU) -> None:  # noqa: B027 - optional hook
        """Called when a queued item's priority inputs changed (fusion added a waiter)."""


class KeyedPolicy(Policy):
    """A policy that runs the queued item with the smallest :meth:`rank` first, from a heap.

    A rank must not change while the clock runs: aging (``cost - rate * (now - arrival)``)
    lowers every queued key at the same rate, so it orders items exactly as
    ``cost + rate * arrival`` does, and policies rank by the latter. When a rank's inputs change
    while the item is queued (fusion adds to ``contribution``), the scheduler calls
    :meth:`update`, which pushes a fresh entry; stale entries are skipped when popped. Push,
    pop and update cost O(log n), remove O(1).
    """

    def __init__(self) -> None:
        self._heap: list[tuple[tuple[float, ...], int, QueuedSEU]] = []
        self._live: dict[QueuedSEU, int] = {}  # item -> the number of its current heap entry
        self._numbers = itertools.count()

    @abc.abstractmethod
    def rank(self, item: QueuedSEU) -> tuple[float, ...]:
        """Smaller runs first; the base appends (query arrival, sequence) as tie-breakers."""

    def full_rank(self, item: QueuedSEU) -> tuple[float, ...]:
        return (*self.rank(item), item.query_arrival, item.seq)

    def push(self, item: QueuedSEU) -> None:
        number = next(self._numbers)
        self._live[item] = number
        heapq.heappush(self._heap, (self.full_rank(item), number, item))
        if len(self._heap) > 2 * len(self._live) + 64:  # mostly stale: rebuild
            self._heap = [e for e in self._heap if self._live.get(e[2]) == e[1]]
            heapq.heapify(self._heap)

    def update(self, item: QueuedSEU) -> None:
        if item in self._live:
            self.push(item)

    def pop(self, now: float) -> QueuedSEU | None:
        while self._heap:
            _, number, item = heapq.heappop(self._heap)
            if self._live.get(item) == number:
                del self._live[item]
                return item
        return None

    def remove(self, item: QueuedSEU) -> None:
        self._live.pop(item, None)

    def __len__(self) -> int:
        return len(self._live)

    def __iter__(self) -> Iterator[QueuedSEU]:
        return iter(list(self._live))

    def items(self) -> list[QueuedSEU]:
        return list(self._live)
