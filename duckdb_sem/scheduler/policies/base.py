"""The policy interface: which queued SEU runs next.

A policy orders :class:`QueuedSEU` items. It sees each item's query, arrival times, the query's
estimated remaining cost, the summed priority contribution of every query waiting on it
(fusion), and the service its query has attained so far. Policies are pure ordering: the
scheduler owns threads, backends, fusion and admission, and asks the policy only between SEUs,
so every preemption happens at an SEU boundary and no finished work is ever lost.

Most policies are a key function over the queue (:class:`KeyedPolicy`): the item with the
smallest key runs next. Ties break on the query's arrival, then the item's sequence number, so
every order is deterministic.
"""

from __future__ import annotations

import abc
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


class KeyedPolicy(Policy):
    """A policy that runs the queued item with the smallest :meth:`key` first."""

    def __init__(self) -> None:
        self._items: list[QueuedSEU] = []

    @abc.abstractmethod
    def key(self, item: QueuedSEU, now: float) -> tuple[float, ...]:
        """Smaller runs first; the base appends (query arrival, sequence) as tie-breakers."""

    def _full_key(self, item: QueuedSEU, now: float) -> tuple[float, ...]:
        return (*self.key(item, now), item.query_arrival, item.seq)

    def push(self, item: QueuedSEU) -> None:
        self._items.append(item)

    def pop(self, now: float) -> QueuedSEU | None:
        if not self._items:
            return None
        best = min(self._items, key=lambda i: self._full_key(i, now))
        self._items.remove(best)
        return best

    def remove(self, item: QueuedSEU) -> None:
        if item in self._items:
            self._items.remove(item)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[QueuedSEU]:
        return iter(list(self._items))

    def items(self) -> list[QueuedSEU]:
        return list(self._items)
