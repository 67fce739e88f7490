"""Multi-level feedback queue by attained service (least-attained-service scheduling).

Without any cost estimate, a query's level is set by the service (tokens) it has already
received: level ``k`` holds queries that attained less than ``quantum * (2**(k+1) - 1)`` tokens,
capped at ``levels - 1``. Lower levels run first; within a level, the SEU queued first runs first
(round robin between queries of a level, since each query queues one SEU at a time). New and
short queries therefore overtake long ones, which sink level by level as they are served.
"""

from __future__ import annotations

import math

from duckdb_sem.scheduler.policies.base import KeyedPolicy, QueuedSEU

__all__ = ["MLFQ"]


class MLFQ(KeyedPolicy):
    name = "mlfq"

    def __init__(self, *, quantum: float = 4096.0, levels: int = 6) -> None:
        super().__init__()
        if quantum <= 0 or levels < 1:
            raise ValueError("MLFQ needs quantum > 0 and levels >= 1")
        self.quantum = quantum
        self.levels = levels

    def level(self, attained: float) -> int:
        # level k covers attained in [quantum * (2**k - 1), quantum * (2**(k+1) - 1))
        k = math.floor(math.log2(max(0.0, attained) / self.quantum + 1.0))
        return min(self.levels - 1, k)

    def rank(self, item: QueuedSEU) -> tuple[float, ...]:
        return (float(self.level(item.attained)), item.arrival)
