"""The scheduler: cache, fusion, a policy-ordered queue and admission per backend replica.

A submitted SEU's requests are answered from, in order: the persistent cache; an identical
request already queued or running (fusion by signature: the SEU attaches to it and, while it is
queued, adds its priority contribution); otherwise they become new work. New work waits in the
policy's queue as one :class:`QueuedSEU` and is dispatched to the least loaded backend replica
that admits it (:mod:`.admission`), so the policy, not a backend's queue, decides the order.
Dispatched work runs to completion; preemption happens between SEUs, so no finished work is
lost. Completions stream back per backend batch and go to the cache before anyone else can ask.

Thread-safe: ``submit`` may be called from any thread (DuckDB UDF threads, HTTP handlers).
Deterministic under an injected ``clock`` and a :class:`ManualExecutor`.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from duckdb_sem.backends.base import Backend
from duckdb_sem.cache.store import LLMCache
from duckdb_sem.errors import QueryCancelledError, SchedulerError, SemError
from duckdb_sem.llm.request import Completion, LLMRequest
from duckdb_sem.scheduler.accounting import QueryState, ThroughputWindow, Usage
from duckdb_sem.scheduler.admission import (
    ReplicaLimits,
    ReplicaState,
    estimate_tokens,
    least_loaded,
)
from duckdb_sem.scheduler.executor import Dispatch, Executor, ThreadExecutor
from duckdb_sem.scheduler.policies import Policy, QueuedSEU, make_policy
from duckdb_sem.scheduler.seu import SEU, Served, SEUResult

__all__ = ["Scheduler"]

_RECENT = 4096  # completed answers kept until the cache surely has them
_PRUNE_AFTER_S = 120.0  # forget idle queries after this long


@dataclass(eq=False)
class _Waiter:
    """One submitted SEU waiting for its slots to fill."""

    seu: SEU
    future: Future[SEUResult]
    slots: list[Completion | None]
    served: list[Served]
    missing: int
    state: QueryState
    cancelled: bool = False


@dataclass(eq=False)
class _Pending:
    """One unique request (by signature), queued or running, and who waits on it."""

    signature: str
    request: LLMRequest
    tokens: int
    key: str = ""  # the fusion key: the signature, unless fusion is off
    waiters: list[tuple[_Waiter, int]] = field(default_factory=list)
    item: QueuedSEU | None = None  # the queue item that will run it, while queued


@dataclass(eq=False)
class _Running:
    dispatch: Dispatch
    replica: ReplicaState
    work: list[_Pending]
    answered: int = 0


def _naming(error: BaseException, operator: str, backend: Backend) -> BaseException:
    """The same error, its message naming the operator that waited and the backend that failed."""
    if not isinstance(error, SemError):
        return error
    message = str(error)
    if backend.spec not in message:
        message = f"{backend.describe()}: {message}"
    named = type(error)(f"{operator or 'semantic operator'} failed: {message}")
    named.__cause__ = error
    return named


class Scheduler:
    """Implements :class:`~duckdb_sem.scheduler.seu.SchedulerClient`; see the module docstring."""

    def __init__(
        self,
        backends: Sequence[Backend],
        *,
        policy: Policy | str = "srtf",
        cache: LLMCache | None = None,
        clock: Callable[[], float] = time.monotonic,
        executor: Executor | None = None,
        limits: Sequence[ReplicaLimits] | None = None,
        aging_rate: float | None = None,
        fusion: bool = True,
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
        self.policy = (
            make_policy(policy, aging_rate=aging_rate) if isinstance(policy, str) else policy
        )
        self.cache = cache
        self.clock = clock
        self.fusion = fusion  # False only for ablations: identical requests then run again
        lims = list(limits) if limits else [ReplicaLimits.for_backend(b) for b in backends]
        self.replicas = [
            ReplicaState(i, b, lim) for i, (b, lim) in enumerate(zip(backends, lims, strict=True))
        ]
        self.executor: Executor = executor or ThreadExecutor(
            sum(r.limits.max_dispatches for r in self.replicas)
        )
        self.usage = Usage()
        self.started = clock()
        self._throughput = ThroughputWindow()
        self._pending: dict[str, _Pending] = {}
        self._item_work: dict[QueuedSEU, list[_Pending]] = {}
        self._running: dict[int, _Running] = {}
        self._queries: dict[str, QueryState] = {}
        self._recent: OrderedDict[str, Completion] = OrderedDict()
        self._dispatch_ids = itertools.count(1)
        self._submits = 0
        self._lock = threading.RLock()
        self._closed = False

    # -- the client contract -------------------------------------------------------------
    def submit(self, seu: SEU) -> Future[SEUResult]:
        future: Future[SEUResult] = Future()
        n = len(seu.requests)
        if n == 0:
            future.set_result(SEUResult((), ()))
            return future
        sigs = [r.signature(self.backend_id) for r in seu.requests]
        cached = self.cache.get_many(sigs) if self.cache is not None else {}
        with self._lock:
            if self._closed:
                raise SchedulerError("the scheduler is closed; open a new connection")
            now = self.clock()
            state = self._state_locked(seu, now)
            waiter = _Waiter(seu, future, [None] * n, [Served.BACKEND] * n, n, state)
            state.waiting += 1
            new_work: list[_Pending] = []
            for index, (sig, request) in enumerate(zip(sigs, seu.requests, strict=True)):
                hit = cached.get(sig) or self._recent.get(sig)
                if hit is not None:
                    self._fill(waiter, index, hit, Served.CACHE)
                    continue
                key = sig if self.fusion else f"{sig}#{id(waiter)}#{index}"
                pending = self._pending.get(key)
                if pending is None:
                    pending = _Pending(sig, request, estimate_tokens(request), key)
                    self._pending[key] = pending
                    new_work.append(pending)
                else:
                    if pending.item is not None and all(
                        w.seu.query_id != seu.query_id for w, _ in pending.waiters
                    ):
                        # priority summation: one more query waits on this queued request
                        pending.item.contribution += 1.0 / max(1, pending.item.size)
                    if pending not in new_work:
                        waiter.served[index] = Served.FUSED
                pending.waiters.append((waiter, index))
            if new_work:
                item = QueuedSEU(
                    query_id=seu.query_id,
                    arrival=now,
                    query_arrival=state.arrival,
                    remaining_cost=seu.remaining_cost,
                    size=len(new_work),
                    tokens=sum(p.tokens for p in new_work),
                    attained=state.attained,
                    operator=seu.operator,
                )
                for pending in new_work:
                    pending.item = item
                self._item_work[item] = new_work
                state.queued += 1
                self.policy.push(item)
                self._dispatch_locked()
        return future

    def cancel(self, query_id: str) -> None:
        """Fail the query's waiting SEUs and drop its queued work that nobody else shares.

        Work already running finishes and goes to the cache (a rerun gets it for free).
        """
        with self._lock:
            for pending in list(self._pending.values()):
                mine = [(w, i) for w, i in pending.waiters if w.seu.query_id == query_id]
                if not mine:
                    continue
                pending.waiters = [(w, i) for w, i in pending.waiters if w.seu.query_id != query_id]
                for waiter, _ in mine:
                    self._fail_waiter(
                        waiter, QueryCancelledError(f"query {query_id} was cancelled")
                    )
                if not pending.waiters and pending.item is not None:
                    work = self._item_work.get(pending.item, [])
                    if pending in work:
                        work.remove(pending)
                    del self._pending[pending.key]
                    if not work:
                        self.policy.remove(pending.item)
                        self._item_work.pop(pending.item, None)
                        owner = self._queries.get(pending.item.query_id)
                        if owner is not None:
                            owner.queued -= 1
            self._queries.pop(query_id, None)

    def finish_query(self, query_id: str) -> None:
        """Forget a finished query's attained service (optional: idle queries are pruned)."""
        with self._lock:
            state = self._queries.get(query_id)
            if state is not None and not state.waiting and not state.queued:
                del self._queries[query_id]

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self.executor.close()

    # -- the executor's callbacks ----------------------------------------------------------
    def complete(
        self, dispatch_id: int, completions: Sequence[Completion], offset: int = 0
    ) -> None:
        with self._lock:
            running = self._running.get(dispatch_id)
            if running is None:
                return
            chunk = running.work[offset : offset + len(completions)]
        if self.cache is not None:
            self.cache.put_many({p.signature: c for p, c in zip(chunk, completions, strict=True)})
        with self._lock:
            now = self.clock()
            replica = running.replica
            for pending, completion in zip(chunk, completions, strict=True):
                if self._pending.get(pending.key) is pending:
                    del self._pending[pending.key]
                if self.cache is not None and completion.error is None:
                    self._recent[pending.signature] = completion
                    if len(self._recent) > _RECENT:
                        self._recent.popitem(last=False)
                self._throughput.add(completion.prompt_tokens + completion.completion_tokens, now)
                for waiter, index in pending.waiters:
                    self._fill(waiter, index, completion, Served.BACKEND)
                replica.requests -= 1
                replica.tokens -= pending.tokens
                replica.completed_requests += 1
            running.answered += len(chunk)
            if running.answered >= len(running.work):
                self._release_locked(running)

    def fail(self, dispatch_id: int, error: BaseException) -> None:
        with self._lock:
            running = self._running.get(dispatch_id)
            if running is None:
                return
            backend = running.replica.backend
            for pending in running.work[running.answered :]:
                if self._pending.get(pending.key) is pending:
                    del self._pending[pending.key]
                for waiter, _ in pending.waiters:
                    self._fail_waiter(waiter, _naming(error, waiter.seu.operator, backend))
                running.replica.requests -= 1
                running.replica.tokens -= pending.tokens
            self._release_locked(running)

    # -- observability --------------------------------------------------------------------
    def queue_length(self) -> int:
        with self._lock:
            return len(self.policy)

    def in_flight(self) -> int:
        with self._lock:
            return sum(r.requests for r in self.replicas)

    def status(self) -> dict[str, object]:
        """A JSON-able snapshot: replicas, queue, live queries, usage (``/v1/status``)."""
        with self._lock:
            now = self.clock()
            self._prune_locked(now)
            queued = sorted(self.policy.items(), key=lambda i: i.seq)
            return {
                "backend_id": self.backend_id,
                "simulated": any(b.simulated for b in self.backends),
                "policy": self.policy.name,
                "uptime_s": round(now - self.started, 3),
                "queue_length": len(queued),
                "queued_requests": sum(i.size for i in queued),
                "in_flight_requests": sum(r.requests for r in self.replicas),
                "tokens_per_s": round(self._throughput.rate(now), 1),
                "replicas": [r.as_dict() for r in self.replicas],
                "queries": [q.as_dict(now) for q in self._queries.values()],
                "usage": self.usage.as_dict(),
            }

    # -- internals -------------------------------------------------------------------------
    def _state_locked(self, seu: SEU, now: float) -> QueryState:
        state = self._queries.get(seu.query_id)
        if state is None:
            state = QueryState(seu.query_id, seu.connection, now, now, usage=Usage())
            self._queries[seu.query_id] = state
        state.last_seen = now
        state.remaining_cost = seu.remaining_cost
        state.operator = seu.operator
        state.seus += 1
        self._submits += 1
        if self._submits % 256 == 0:
            self._prune_locked(now)
        return state

    def _prune_locked(self, now: float) -> None:
        for qid, state in list(self._queries.items()):
            if not state.waiting and not state.queued and now - state.last_seen > _PRUNE_AFTER_S:
                del self._queries[qid]

    def _fill(self, waiter: _Waiter, index: int, completion: Completion, how: Served) -> None:
        if waiter.cancelled or waiter.slots[index] is not None:
            return
        waiter.slots[index] = completion
        if how is not Served.BACKEND or waiter.served[index] is not Served.FUSED:
            waiter.served[index] = how
        tokens = completion.prompt_tokens + completion.completion_tokens
        kind = waiter.served[index].value
        self.usage.add(kind, tokens)
        if waiter.state.usage is not None:
            waiter.state.usage.add(kind, tokens)
        waiter.missing -= 1
        if waiter.missing == 0:
            waiter.state.waiting -= 1
            slots = tuple(c for c in waiter.slots if c is not None)
            waiter.future.set_result(SEUResult(slots, tuple(waiter.served)))

    def _fail_waiter(self, waiter: _Waiter, error: BaseException) -> None:
        if waiter.cancelled or waiter.future.done():
            return
        waiter.cancelled = True
        waiter.state.waiting -= 1
        waiter.future.set_exception(error)

    def _release_locked(self, running: _Running) -> None:
        del self._running[running.dispatch.dispatch_id]
        running.replica.dispatches -= 1
        if not self._closed:
            self._dispatch_locked()

    def _dispatch_locked(self) -> None:
        while len(self.policy):
            replica = least_loaded(self.replicas)
            if replica is None:
                return
            now = self.clock()
            item = self.policy.pop(now)
            if item is None:
                return
            work = self._item_work.pop(item, [])
            owner = self._queries.get(item.query_id)
            if not work:
                if owner is not None:
                    owner.queued -= 1
                continue
            tokens = sum(p.tokens for p in work)
            if not replica.admits(len(work), tokens):
                self._item_work[item] = work
                self.policy.push(item)
                return
            self.policy.dispatched(item, now)
            dispatch = Dispatch(
                dispatch_id=next(self._dispatch_ids),
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
            self._running[dispatch.dispatch_id] = _Running(dispatch, replica, work)
            self.executor.start(dispatch, replica.backend, self)
