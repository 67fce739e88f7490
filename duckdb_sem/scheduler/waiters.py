"""Who waits on what inside the scheduler: submitted SEUs, unique requests, running dispatches.

A :class:`Waiter` is one submitted SEU with one slot per request; a :class:`Pending` is one
unique request (by signature, the fusion key) that one or more waiters share; a
:class:`Running` is one dispatch on a replica and the pending requests it answers. Answers and
errors reach the waiters through :func:`fill` and :func:`fail_waiter`, which keep the usage
accounting (virtual versus physical, fused, cache) and resolve each SEU's future exactly once.

Example: two queries submit the same prompt; the first creates a ``Pending`` and queues it, the
second attaches as a second waiter (``Served.FUSED``); one completion then fills both slots.

Not thread-safe by themselves: the scheduler calls these under its lock.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field

from duckdb_sem.backends.base import Backend
from duckdb_sem.cache.store import LLMCache
from duckdb_sem.errors import SemError
from duckdb_sem.llm.request import Completion, LLMRequest
from duckdb_sem.scheduler.accounting import QueryState, Usage
from duckdb_sem.scheduler.admission import ReplicaState
from duckdb_sem.scheduler.executor import Dispatch
from duckdb_sem.scheduler.policies import QueuedSEU
from duckdb_sem.scheduler.seu import SEU, Served, SEUFuture, SEUResult

__all__ = [
    "Pending",
    "Running",
    "Waiter",
    "abandon",
    "abort_on_backends",
    "dispatch_work",
    "fail_waiter",
    "fill",
    "naming",
]

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Waiter:
    """One submitted SEU waiting for its slots to fill."""

    seu: SEU
    future: Future[SEUResult]
    slots: list[Completion | None]
    served: list[Served]
    missing: int
    state: QueryState
    cancelled: bool = False
    cache: LLMCache | None = None  # the submitting connection's cache (None: no cache)


@dataclass(eq=False)
class Pending:
    """One unique request (by signature), queued or running, and who waits on it."""

    signature: str
    request: LLMRequest
    tokens: int
    key: str = ""  # the fusion key: the signature, unless fusion is off
    waiters: list[tuple[Waiter, int]] = field(default_factory=list)
    item: QueuedSEU | None = None  # the queue item that will run it, while queued
    #: the caches of every connection that asked for it (kept when a query is cancelled, so
    #: work that finishes anyway is cached for a rerun)
    caches: dict[int, LLMCache] = field(default_factory=dict)

    def attach(self, waiter: Waiter, index: int) -> None:
        self.waiters.append((waiter, index))
        if waiter.cache is not None:
            self.caches.setdefault(id(waiter.cache), waiter.cache)


@dataclass(eq=False)
class Running:
    dispatch: Dispatch
    replica: ReplicaState
    work: list[Pending]
    answered: int = 0
    aborted: bool = False  # every query waiting on its unanswered work was cancelled


def dispatch_work(
    dispatch_id: int,
    item: QueuedSEU,
    work: list[Pending],
    *,
    replica: ReplicaState,
    owner: QueryState | None,
    now: float,
) -> Running:
    """The dispatch of a queue item's work to a replica, charged to the replica and its query."""
    tokens = sum(p.tokens for p in work)
    dispatch = Dispatch(
        dispatch_id=dispatch_id,
        replica=replica.index,
        query_id=item.query_id,
        operator=item.operator,
        requests=tuple(p.request for p in work),
        signatures=tuple(p.signature for p in work),
        tokens=tokens,
        at=now,
    )
    for pending in work:
        pending.item = None
    replica.dispatches += 1
    replica.requests += len(work)
    replica.tokens += tokens
    if owner is not None:
        owner.queued -= 1
        owner.attained += tokens
    return Running(dispatch, replica, work)


def abandon(running: Iterable[Running]) -> list[tuple[Backend, list[LLMRequest]]]:
    """Mark the dispatches whose unanswered work nobody waits on any more as aborted, and say
    which requests of which backend to abort."""
    aborts = []
    for dispatch in running:
        rest = dispatch.work[dispatch.answered :]
        if not dispatch.aborted and rest and not any(p.waiters for p in rest):
            dispatch.aborted = True
            aborts.append((dispatch.replica.backend, [p.request for p in rest]))
    return aborts


def abort_on_backends(aborts: Iterable[tuple[Backend, list[LLMRequest]]]) -> None:
    """``Backend.abort`` each (outside the scheduler's lock); a failure is logged, not raised."""
    for backend, requests in aborts:
        try:
            backend.abort(requests)
        except Exception as err:  # noqa: BLE001 - best effort: the work then finishes
            log.warning("abort on %s failed: %s", backend.describe(), err)


def naming(error: BaseException, operator: str, backend: Backend) -> BaseException:
    """The same error, its message naming the operator that waited and the backend that failed."""
    if not isinstance(error, SemError):
        return error
    message = str(error)
    if backend.spec not in message:
        message = f"{backend.describe()}: {message}"
    named = type(error)(f"{operator or 'semantic operator'} failed: {message}")
    named.__cause__ = error
    return named


def fill(waiter: Waiter, index: int, completion: Completion, how: Served, usage: Usage) -> None:
    """Put one answer in a waiter's slot, count it, and resolve the SEU when it is the last."""
    if waiter.cancelled or waiter.slots[index] is not None:
        return
    waiter.slots[index] = completion
    if how is not Served.BACKEND or waiter.served[index] is not Served.FUSED:
        waiter.served[index] = how
    tokens = completion.prompt_tokens + completion.completion_tokens
    kind = waiter.served[index].value
    usage.add(kind, tokens)
    if waiter.state.usage is not None:
        waiter.state.usage.add(kind, tokens)
    waiter.missing -= 1
    if isinstance(waiter.future, SEUFuture):
        waiter.future.answered += 1
    if waiter.missing == 0:
        waiter.state.waiting -= 1
        slots = tuple(c for c in waiter.slots if c is not None)
        waiter.future.set_result(SEUResult(slots, tuple(waiter.served)))


def fail_waiter(waiter: Waiter, error: BaseException) -> None:
    """Fail a waiter's SEU once; later answers for it are ignored."""
    if waiter.cancelled or waiter.future.done():
        return
    waiter.cancelled = True
    waiter.state.waiting -= 1
    waiter.future.set_exception(error)
