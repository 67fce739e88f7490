"""HeraSys-style joint scheduling: SRTF + contribution + anti-starvation, with resource skewing.

The joint priority of a queued SEU is ``remaining_cost / contribution - aging_rate * waited``
(smaller runs first): dynamic SRTF on the query's remaining estimate, divided by the summed
contribution of every query waiting on the SEU (fused work is worth more), minus an
anti-starvation term that grows with waiting time.

Resource skewing: a dynamic threshold, the ``long_quantile`` of the effective remaining costs of
the queued SEUs, splits them into long and short. Short ones go by priority; but the long ones'
heavy work is guaranteed at least ``long_share`` of the tokens dispatched over the recent window:
whenever their share has fallen below it and long work is waiting, the long SEU with the best
priority runs next. This bounds tail latency where strict SRTF would starve long queries.
"""

from __future__ import annotations

import bisect
import heapq
from collections import deque

from duckdb_sem.scheduler.policies.base import KeyedPolicy, QueuedSEU
from duckdb_sem.scheduler.policies.srtf import aged_rank

__all__ = ["Joint"]


class Joint(KeyedPolicy):
    """Short work from the rank heap; the queued costs kept sorted for the long/short split
    (its quantile is a lookup); long work from a second heap that holds, at least, every queued
    SEU costlier than ``_floor`` (entries that fell below the cut are dropped when met)."""

    name = "joint"

    def __init__(
        self,
        *,
        aging_rate: float = 100.0,
        long_quantile: float = 0.75,
        long_share: float = 0.2,
        window: int = 32,
    ) -> None:
        super().__init__()
        if aging_rate < 0 or not 0.0 < long_quantile < 1.0 or not 0.0 <= long_share < 1.0:
            raise ValueError("joint needs aging_rate >= 0, 0 < long_quantile < 1, 0 <= share < 1")
        self.aging_rate = aging_rate
        self.long_quantile = long_quantile
        self.long_share = long_share
        self._recent: deque[tuple[float, bool]] = deque(maxlen=window)  # (tokens, was long)
        self._last_long: dict[int, bool] = {}
        self._costs: list[tuple[float, int, QueuedSEU]] = []  # (effective cost, seq), sorted
        self._cost_of: dict[QueuedSEU, tuple[float, int, QueuedSEU]] = {}
        self._long: list[tuple[tuple[float, ...], int, QueuedSEU]] = []
        self._floor = float("inf")

    def key(self, item: QueuedSEU, now: float) -> float:
        """The priority at ``now``: ``effective_cost - aging_rate * waited`` (smaller first)."""
        return item.effective_cost - self.aging_rate * max(0.0, now - item.arrival)

    def rank(self, item: QueuedSEU) -> tuple[float, ...]:
        return (aged_rank(item, self.aging_rate),)

    def threshold(self) -> float:
        """The long/short boundary: a quantile of the queued effective remaining costs.

        Items strictly above it are long, so a queue of equal costs has no long work."""
        if not self._costs:
            return float("inf")
        return self._costs[int(self.long_quantile * (len(self._costs) - 1))][0]

    def long_fraction(self) -> float:
        total = sum(t for t, _ in self._recent)
        return sum(t for t, long in self._recent if long) / total if total else 0.0

    def pop(self, now: float) -> QueuedSEU | None:
        if not self._costs:
            return None
        cut = self.threshold()
        has_long = self._costs[-1][0] > cut
        best: QueuedSEU | None
        if has_long and self.long_fraction() < self.long_share:
            # guaranteed share for long queries' heavy work: the best long one, oldest first
            best = self._pop_long(cut)
            super().remove(best)
        else:
            best = super().pop(now)
        if best is None:
            return None
        self._last_long[best.seq] = best.effective_cost > cut
        self._forget_cost(best)
        return best

    def remove(self, item: QueuedSEU) -> None:
        super().remove(item)
        self._forget_cost(item)
        self._last_long.pop(item.seq, None)

    def push(self, item: QueuedSEU) -> None:
        super().push(item)
        if item.effective_cost > self._floor:
            heapq.heappush(self._long, (self.full_rank(item), self._live[item], item))
        if len(self._long) > 2 * len(self._live) + 64:  # mostly stale: rebuild
            self._long = [e for e in self._long if self._live.get(e[2]) == e[1]]
            heapq.heapify(self._long)
        self._forget_cost(item)
        entry = (item.effective_cost, item.seq, item)
        bisect.insort(self._costs, entry, key=lambda e: (e[0], e[1]))
        self._cost_of[item] = entry
        self._last_long.pop(item.seq, None)  # a re-queued item is classified afresh

    def dispatched(self, item: QueuedSEU, now: float) -> None:
        self._recent.append((float(max(1, item.tokens)), self._last_long.pop(item.seq, False)))

    def _pop_long(self, cut: float) -> QueuedSEU:
        """The best queued SEU costlier than ``cut`` (one exists), off the long heap."""
        if cut < self._floor:  # bring in every SEU in (cut, floor]: then all above cut are in
            lo = bisect.bisect_right(self._costs, cut, key=lambda e: e[0])
            hi = bisect.bisect_right(self._costs, self._floor, key=lambda e: e[0])
            for _, _, item in self._costs[lo:hi]:
                heapq.heappush(self._long, (self.full_rank(item), self._live[item], item))
            self._floor = cut
        while True:
            _, number, item = heapq.heappop(self._long)
            if self._live.get(item) != number:
                continue  # dispatched, removed or re-ranked since
            if item.effective_cost > cut:
                return item
            self._floor = max(self._floor, item.effective_cost)  # short now: out of the heap

    def _forget_cost(self, item: QueuedSEU) -> None:
        entry = self._cost_of.pop(item, None)
        if entry is not None:
            i = bisect.bisect_left(self._costs, (entry[0], entry[1]), key=lambda e: (e[0], e[1]))
            del self._costs[i]
