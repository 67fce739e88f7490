"""Subquery Execution Units and the scheduler-client contract.

An SEU is one batch of a query's LLM work: the requests of one operator over one input batch.
Queries submit SEUs one at a time, so the scheduler can run another query's SEU between two of
them (preemption at SEU boundaries) without losing finished work.
"""

from __future__ import annotations

import enum
import logging
import threading
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
    ``Future`` (the sidecar's client) reports only the whole SEU.

    The count after each batch is kept (:meth:`mark`, under the scheduler's lock, so in the
    order the batches answered) and every listener hears each of them once, in that order,
    however late it was added and whichever thread notifies first: a loaded machine that runs
    two batches before the submitting thread adds its listener, or that lets a later batch's
    notify overtake an earlier one's, still reports every batch."""

    def __init__(self) -> None:
        super().__init__()
        self.answered = 0  # requests with an answer (cache hits count at submit)
        self._marks: list[int] = []  # ``answered`` after each batch that left it unfinished
        self._listeners: list[_Listener] = []
        self._telling = threading.RLock()  # a listener may add another one

    def mark(self) -> None:
        """Record ``answered`` as one batch's progress (called under the scheduler's lock)."""
        if self.answered and (not self._marks or self._marks[-1] < self.answered):
            self._marks.append(self.answered)

    def add_answer_listener(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(answered)`` for each backend batch that answered some of it, those
        before it was added included (at once), then after each later one."""
        with self._telling:
            self._listeners.append(_Listener(listener))
            self._tell()

    def notify(self) -> None:
        """Tell the listeners what they have not heard (never under the scheduler's lock; a
        failing listener is logged)."""
        with self._telling:
            self._tell()

    def _tell(self) -> None:
        for entry in list(self._listeners):
            while entry.heard < len(self._marks):
                count = self._marks[entry.heard]
                entry.heard += 1
                try:
                    entry.listener(count)
                except Exception as err:  # noqa: BLE001 - progress must not fail the batch
                    log.warning("SEU progress listener failed: %s", err)


@dataclass(slots=True)
class _Listener:
    listener: Callable[[int], None]
    heard: int = 0  # how many of the future's marks it has been told


class SchedulerClient(Protocol):
    """What the runtime needs from a scheduler, in process or in the sidecar."""

    backend_id: str

    def submit(self, seu: SEU) -> Future[SEUResult]: ...

    def cancel(self, query_id: str) -> None: ...

    def close(self) -> None: ...
