"""Admission control: how much work each backend replica may hold at once.

The scheduler keeps every replica busy but never lets a backend's internal queue decide the
order: a replica takes a new dispatch only while it is under its limits on dispatches, requests
and estimated tokens in flight; everything else waits in the scheduler's policy queue. An idle
replica always takes the next dispatch, however large, so nothing can be stuck. New work goes to
the least loaded replica (fewest requests, then tokens in flight).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from duckdb_sem.backends.base import Backend

__all__ = ["ReplicaLimits", "ReplicaState", "least_loaded"]


@dataclass(frozen=True, slots=True)
class ReplicaLimits:
    max_dispatches: int
    max_requests: int
    max_tokens: int | None = None

    @staticmethod
    def for_backend(
        backend: Backend, *, max_requests: int | None = None, max_tokens: int | None = None
    ) -> ReplicaLimits:
        cap = backend.capacity()
        return ReplicaLimits(
            max_dispatches=max(1, cap.max_concurrent_batches),
            max_requests=max_requests or max(1, cap.max_batch * cap.max_concurrent_batches),
            max_tokens=max_tokens or cap.max_tokens_in_flight,
        )


@dataclass(eq=False)
class ReplicaState:
    index: int
    backend: Backend
    limits: ReplicaLimits
    dispatches: int = 0
    requests: int = 0
    tokens: int = 0
    completed_requests: int = 0

    def admits(self, requests: int, tokens: int) -> bool:
        if self.dispatches == 0:
            return True
        lim = self.limits
        return (
            self.dispatches < lim.max_dispatches
            and self.requests + requests <= lim.max_requests
            and (lim.max_tokens is None or self.tokens + tokens <= lim.max_tokens)
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "replica": self.index,
            "backend": self.backend.describe(),
            "dispatches_in_flight": self.dispatches,
            "requests_in_flight": self.requests,
            "tokens_in_flight": self.tokens,
            "max_requests": self.limits.max_requests,
            "max_tokens": self.limits.max_tokens,
            "completed_requests": self.completed_requests,
        }


def least_loaded(replicas: Sequence[ReplicaState]) -> ReplicaState | None:
    """The replica with the fewest requests (then tokens) in flight that can take more."""
    free = [r for r in replicas if r.dispatches < r.limits.max_dispatches or r.dispatches == 0]
    if not free:
        return None
    return min(free, key=lambda r: (r.requests, r.tokens, r.index))
