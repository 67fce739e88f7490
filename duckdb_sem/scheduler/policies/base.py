"""The policy interface: which queued SEU runs next.

A policy orders :class:`QueuedSEU` items. It sees each item's query, arrival time, estimated
remaining cost, the summed priority contribution of every query waiting on it (fusion), and the
service its query has attained so far. Policies are pure ordering: the scheduler owns threads,
backends and admission.
"""

from __future__ import annotations

import abc
import itertools
from dataclasses import dataclass, field

__all__ = ["Policy", "QueuedSEU"]

_ids = itertools.count()


@dataclass(eq=False)
class QueuedSEU:
    query_id: str
    arrival: float  # when this SEU was queued (scheduler clock)
    query_arrival: float  # when its query submitted its first SEU
    remaining_cost: float
    size: int  # requests to run
    contribution: float = 1.0  # summed over queries sharing it (fusion)
    attained: float = 0.0  # service the query has had so far (requests run)
    seq: int = field(default_factory=lambda: next(_ids))


class Policy(abc.ABC):
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

    def items(self) -> list[QueuedSEU]:
        return []
