"""Subquery Execution Units and the scheduler-client contract.

An SEU is one batch of a query's LLM work: the requests of one operator over one input batch.
Queries submit SEUs one at a time, so the scheduler can run another query's SEU between two of
them (preemption at SEU boundaries) without losing finished work.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol

from duckdb_sem.llm.request import Completion, LLMRequest

__all__ = ["SEU", "SEUFuture", "SEUResult", "SchedulerClient", "Served"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SEU:
    query_id: str
    operator: str  # a label for progress and metrics, e.g. "sem_filter#1"
    requests: tuple[LLMRequest, ...]
    remaining_cost: float = 0.0  # the query's estimated remaining LLM cost (tokens) incl. this SEU
    connection: str = ""


class Served(enum.Enum):
    """How one request of an SEU was answered."""

    BACKEND = "backend"  # executed by the backend for this SEU (physical work)
    CACHE = "cache"  # from the persistent cache
    FUSED = "fused"  # shared with an identical request already queued or running


@dataclass(frozen=True, slots=True)
class SEUResult:
    completions: tuple[Completion, ...]
    served: tuple[Served, ...]


class SEUFuture(Future[SEUResult]):
    """An SEU's future that also counts its requests answered so far and tells its listeners
    after each backend batch, so a query waiting on one SEU (a 20-row query is one) shows its
    progress before the SEU is done. The in-process scheduler returns these; a plain
    ``Future`` (the sidecar's client) reports only the whole SEU."""

    def __init__(self) -> None:
        super().__init__()
        self.answered = 0  # requests with an answer (cache hits count at submit)
        self._listeners: list[Callable[[int], None]] = []

    def add_answer_listener(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(answered)`` after each backend batch that answers some of it (and
        now, if some were answered before it was added)."""
        self._listeners.append(listener)
        if self.answered and not self.done():
            listener(self.answered)

    def notify(self) -> None:
        """Tell the listeners (never under the scheduler's lock; a failing one is logged)."""
        for listener in list(self._listeners):
            try:
                listener(self.answered)
            except Exception as err:  # noqa: BLE001 - progress must not fail the backend batch
                log.warning("SEU progress listener failed: %s", err)


class SchedulerClient(Protocol):
    """What the runtime needs from a scheduler, in process or in the sidecar."""

    backend_id: str

    def submit(self, seu: SEU) -> Future[SEUResult]: ...

    def cancel(self, query_id: str) -> None: ...

    def close(self) -> None: ...
