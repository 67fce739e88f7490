"""The in-process scheduler: cache, fusion, a policy-ordered queue and admission per backend.

A submitted SEU's requests are answered from, in order: the persistent cache; an identical
request already queued or running (fusion by signature: the SEU attaches to it and adds its
priority contribution); otherwise they become new work. New work waits in the policy's queue and
is dispatched one SEU at a time to a backend replica with free capacity (``Capacity``): the
backend never holds more than it can run, so the policy, not the backend's queue, decides order.
SEUs run to completion once dispatched; preemption happens between SEUs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from duckdb_sem.backends.base import Backend
from duckdb_sem.cache.store import LLMCache
from duckdb_sem.errors import QueryCancelledError, SchedulerError, SemError
from duckdb_sem.llm.request import Completion, LLMRequest
from duckdb_sem.scheduler.policies import Policy, QueuedSEU, make_policy
from duckdb_sem.scheduler.seu import SEU, Served, SEUResult

__all__ = ["Scheduler"]

log = logging.getLogger(__name__)


@dataclass(eq=False)
class _Waiter:
    """One submitted SEU waiting for its slots to fill."""

    seu: SEU
    future: Future[SEUResult]
    slots: list[Completion | None]
    served: list[Served]
    missing: int
    cancelled: bool = False


@dataclass(eq=False)
class _Pending:
    """One unique request (by signature), queued or running, and who waits on it."""

    signature: str
    request: LLMRequest
    waiters: list[tuple[_Waiter, int]] = field(default_factory=list)
    item: QueuedSEU | None = None  # the queue item that will run it, while queued


@dataclass(eq=False)
class _Replica:
    backend: Backend
    running: int = 0


class Scheduler:
    """Thread-safe; ``submit`` may be called from any thread (DuckDB UDF threads included)."""

    def __init__(
        self,
        backends: Sequence[Backend],
        *,
        policy: Policy | str = "srtf",
        cache: LLMCache | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not backends:
            raise SchedulerError("a scheduler needs at least one backend")
        ids = {b.backend_id for b in backends}
        if len(ids) != 1:
            raise SchedulerError(
                f"replicas behind one scheduler must serve the same model; got {sorted(ids)}"
            )
        self.backend_id = backends[0].backend_id
        self.backends = list(backends)
        self.policy = make_policy(policy) if isinstance(policy, str) else policy
        self.cache = cache
        self.clock = clock
        self._replicas = [_Replica(b) for b in backends]
        self._pending: dict[str, _Pending] = {}
        self._item_work: dict[QueuedSEU, list[_Pending]] = {}
        self._query_arrival: dict[str, float] = {}
        self._attained: dict[str, float] = {}
        self._lock = threading.Condition()
        workers = sum(b.capacity().max_concurrent_batches for b in backends)
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="sem-llm")
        self._closed = False

    # -- the client contract -------------------------------------------------------------
    def submit(self, seu: SEU) -> Future[SEUResult]:
        future: Future[SEUResult] = Future()
        n = len(seu.requests)
        waiter = _Waiter(seu, future, [None] * n, [Served.BACKEND] * n, n)
        if n == 0:
            future.set_result(SEUResult((), ()))
            return future
        sigs = [r.signature(self.backend_id) for r in seu.requests]
        cached = self.cache.get_many(sigs) if self.cache is not None else {}
        with self._lock:
            if self._closed:
                raise SchedulerError("the scheduler is closed; open a new connection")
            now = self.clock()
            self._query_arrival.setdefault(seu.query_id, now)
            new_work: list[_Pending] = []
            for index, (sig, request) in enumerate(zip(sigs, seu.requests, strict=True)):
                hit = cached.get(sig)
                if hit is not None:
                    self._fill(waiter, index, hit, Served.CACHE)
                    continue
                pending = self._pending.get(sig)
                if pending is None:
                    pending = _Pending(sig, request)
                    self._pending[sig] = pending
                    new_work.append(pending)
                elif pending.item is not None and all(
                    w.seu.query_id != seu.query_id for w, _ in pending.waiters
                ):
                    pending.item.contribution += 1.0 / max(1, pending.item.size)
                if pending not in new_work:
                    waiter.served[index] = Served.FUSED
                pending.waiters.append((waiter, index))
            if new_work:
                item = QueuedSEU(
                    query_id=seu.query_id,
                    arrival=now,
                    query_arrival=self._query_arrival[seu.query_id],
                    remaining_cost=seu.remaining_cost,
                    size=len(new_work),
                    attained=self._attained.get(seu.query_id, 0.0),
                )
                for pending in new_work:
                    pending.item = item
                self._item_work[item] = new_work
                self.policy.push(item)
                self._dispatch_locked()
        return future

    def cancel(self, query_id: str) -> None:
        """Fail the query's waiting SEUs and drop its queued work that nobody else shares."""
        with self._lock:
            for pending in list(self._pending.values()):
                mine = [(w, i) for w, i in pending.waiters if w.seu.query_id == query_id]
                if not mine:
                    continue
                pending.waiters = [(w, i) for w, i in pending.waiters if w.seu.query_id != query_id]
                for waiter, _ in mine:
                    if not waiter.cancelled:
                        waiter.cancelled = True
                        waiter.future.set_exception(
                            QueryCancelledError(f"query {query_id} was cancelled")
                        )
                if not pending.waiters and pending.item is not None:
                    work = self._item_work.get(pending.item, [])
                    if pending in work:
                        work.remove(pending)
                    del self._pending[pending.signature]
                    if not work:
                        self.policy.remove(pending.item)
                        self._item_work.pop(pending.item, None)
            self._query_arrival.pop(query_id, None)
            self._attained.pop(query_id, None)

    def finish_query(self, query_id: str) -> None:
        with self._lock:
            self._query_arrival.pop(query_id, None)
            self._attained.pop(query_id, None)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=True, cancel_futures=True)

    # -- observability --------------------------------------------------------------------
    def queue_length(self) -> int:
        with self._lock:
            return len(self.policy)

    def in_flight(self) -> int:
        with self._lock:
            return sum(r.running for r in self._replicas)

    # -- internals -------------------------------------------------------------------------
    def _fill(self, waiter: _Waiter, index: int, completion: Completion, how: Served) -> None:
        if waiter.cancelled or waiter.slots[index] is not None:
            return
        waiter.slots[index] = completion
        if how is not Served.BACKEND or waiter.served[index] is not Served.FUSED:
            waiter.served[index] = how
        waiter.missing -= 1
        if waiter.missing == 0:
            slots = tuple(c for c in waiter.slots if c is not None)
            waiter.future.set_result(SEUResult(slots, tuple(waiter.served)))

    def _dispatch_locked(self) -> None:
        while len(self.policy):
            replica = min(
                (
                    r
                    for r in self._replicas
                    if r.running < r.backend.capacity().max_concurrent_batches
                ),
                key=lambda r: r.running,
                default=None,
            )
            if replica is None:
                return
            item = self.policy.pop(self.clock())
            if item is None:
                return
            work = self._item_work.pop(item, [])
            for pending in work:
                pending.item = None
            if not work:
                continue
            replica.running += 1
            self._attained[item.query_id] = self._attained.get(item.query_id, 0.0) + len(work)
            self._pool.submit(self._run, replica, work)

    def _run(self, replica: _Replica, work: list[_Pending]) -> None:
        backend = replica.backend
        max_batch = max(1, backend.capacity().max_batch)
        try:
            for start in range(0, len(work), max_batch):
                chunk = work[start : start + max_batch]
                results = backend.complete([p.request for p in chunk])
                if len(results) != len(chunk):
                    raise SchedulerError(
                        f"backend {backend.describe()} returned {len(results)} answers "
                        f"for {len(chunk)} requests"
                    )
                if self.cache is not None:
                    self.cache.put_many(
                        {p.signature: c for p, c in zip(chunk, results, strict=True)}
                    )
                with self._lock:
                    for pending, completion in zip(chunk, results, strict=True):
                        self._pending.pop(pending.signature, None)
                        for waiter, index in pending.waiters:
                            self._fill(waiter, index, completion, Served.BACKEND)
        except BaseException as err:
            failure = (
                err
                if isinstance(err, SemError)
                else SchedulerError(
                    f"backend {backend.describe()} failed: {type(err).__name__}: {err}"
                )
            )
            log.warning("backend batch failed: %s", failure)
            with self._lock:
                for pending in work:
                    if self._pending.get(pending.signature) is pending:
                        del self._pending[pending.signature]
                    for waiter, _ in pending.waiters:
                        if not waiter.cancelled and not waiter.future.done():
                            waiter.cancelled = True
                            waiter.future.set_exception(failure)
        finally:
            with self._lock:
                replica.running -= 1
                self._dispatch_locked()
