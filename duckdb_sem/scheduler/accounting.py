"""Usage accounting per query and per server: virtual versus physical, and what saved the rest.

*Virtual* usage counts every request an SEU asked for, as if it ran alone; *physical* usage
counts what a backend actually ran. The difference is split by cause: ``fused`` (shared with an
identical request of another query queued or running) and ``cache`` (answered from the
persistent cache). Tokens are prompt plus completion tokens of the answer.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, fields

__all__ = ["QueryState", "ThroughputWindow", "Usage"]


@dataclass(slots=True)
class Usage:
    virtual_calls: int = 0
    virtual_tokens: int = 0
    physical_calls: int = 0
    physical_tokens: int = 0
    fused_calls: int = 0
    fused_tokens: int = 0
    cache_calls: int = 0
    cache_tokens: int = 0

    def add(self, how: str, tokens: int) -> None:
        self.virtual_calls += 1
        self.virtual_tokens += tokens
        if how == "backend":
            self.physical_calls += 1
            self.physical_tokens += tokens
        elif how == "fused":
            self.fused_calls += 1
            self.fused_tokens += tokens
        else:
            self.cache_calls += 1
            self.cache_tokens += tokens

    def as_dict(self) -> dict[str, int]:
        return {f.name: int(getattr(self, f.name)) for f in fields(self)}


@dataclass(slots=True)
class QueryState:
    """What the scheduler knows about one live query (for policies, status and metrics)."""

    query_id: str
    connection: str
    arrival: float
    last_seen: float
    remaining_cost: float = 0.0
    operator: str = ""
    attained: float = 0.0  # estimated tokens dispatched for it
    seus: int = 0
    queued: int = 0  # its SEU items waiting in the policy queue
    waiting: int = 0  # its submitted SEUs not yet answered
    usage: Usage | None = None
    done_at: float | None = None  # when its run said it finished (``Scheduler.finish_query``)

    def as_dict(self, now: float) -> dict[str, object]:
        state = "queued" if self.queued else "running" if self.waiting else "idle"
        if self.done_at is not None and state == "idle":
            state = "done"
        return {
            "query_id": self.query_id,
            "connection": self.connection,
            "operator": self.operator,
            "state": state,
            "age_s": round(now - self.arrival, 3),
            "remaining_cost": 0.0 if state == "done" else round(self.remaining_cost, 1),
            "attained_tokens": round(self.attained, 1),
            "seus": self.seus,
            "usage": (self.usage or Usage()).as_dict(),
        }


class ThroughputWindow:
    """Physical tokens per second over the last ``seconds`` of wall time.

    Bounded: events are summed into buckets of ``seconds / buckets`` and buckets older than the
    window are dropped on every ``add``, so a long query keeps at most ``buckets + 1`` entries
    (the window's edge moves in steps of one bucket).
    """

    def __init__(self, seconds: float = 10.0, buckets: int = 100) -> None:
        self.seconds = seconds
        self._width = seconds / max(1, buckets)
        self._events: deque[list[float]] = deque()  # [bucket start, tokens]

    def add(self, tokens: int, now: float | None = None) -> None:
        t = time.monotonic() if now is None else now
        last = self._events[-1] if self._events else None
        if last is not None and last[0] <= t < last[0] + self._width:
            last[1] += tokens
        else:
            self._events.append([t, float(tokens)])
        self._expire(t)

    def rate(self, now: float | None = None) -> float:
        t = time.monotonic() if now is None else now
        self._expire(t)
        return sum(n for _, n in self._events) / self.seconds

    def _expire(self, t: float) -> None:
        while self._events and self._events[0][0] < t - self.seconds:
            self._events.popleft()
