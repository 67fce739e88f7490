"""The scheduler: cache, fusion, a policy-ordered queue and admission per backend replica.

A submitted SEU's requests are answered from, in order: its connection's persistent cache
(:meth:`Scheduler.submit_with`; one scheduler serves connections with different caches); an identical
request already queued or running (fusion by signature: the SEU attaches to it and, while it is
queued, adds its priority contribution); otherwise they become new work. New work waits in the
policy's queue as one :class:`QueuedSEU` and is dispatched to the backend replica its placement
picks (:mod:`.placement`: least loaded, or prefix affinity) if that replica admits it
(:mod:`.admission`), so the policy, not a backend's queue, decides the order.
Dispatched work runs to completion; preemption happens between SEUs, so no finished work is
lost. Completions stream back per backend batch and go to the cache of every connection that
asked for them before anyone else can ask. Cancelling a query whose work is running aborts it
on the backend (``Backend.abort``) once no other query waits on it, and the executor stops
between backend batches.

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

from duckdb_sem.backends.base import Backend
from duckdb_sem.backends.tokens import request_tokens
from duckdb_sem.cache.store import LLMCache
from duckdb_sem.errors import QueryCancelledError, SchedulerError
from duckdb_sem.llm.request import Completion, signatures
from duckdb_sem.scheduler.accounting import QueryState, ThroughputWindow, Usage
from duckdb_sem.scheduler.admission import (
    ReplicaLimits,
    ReplicaState,
    least_loaded,
)
from duckdb_sem.scheduler.executor import Executor, ThreadExecutor
from duckdb_sem.scheduler.placement import Placement, make_placement
from duckdb_sem.scheduler.policies import Policy, QueuedSEU, make_policy
from duckdb_sem.scheduler.queries import prune_idle, status_snapshot, track_query
from duckdb_sem.scheduler.seu import SEU, Served, SEUFuture, SEUResult
from duckdb_sem.scheduler.waiters import (
    Pending,
    Running,
    Waiter,
    abandon,
    abort_on_backends,
    dispatch_work,
    fail_waiter,
    fill,
    naming,
)

__all__ = ["Scheduler"]

_RECENT = 4096  # completed answers kept until the cache surely has them
_CANCELLED = 4096  # cancelled query ids remembered: their SEUs that arrive later are refused


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
        placement: Placement | str = "least-loaded",
    ) -> None:
        if not backends:
            raise SchedulerError("a scheduler needs at least one backend")
        models = {b.replica_identity for b in backends}
        if len(models) != 1:
            raise SchedulerError(
                "replicas behind one scheduler must serve the same model with the same "
                f"answer-changing options; got {sorted(models)}"
            )
        ids = {b.backend_id for b in backends}
        # one identity for the requests' signatures: the backend's own, or, for replicas that
        # differ only in where they are served (openai:A, openai:B), the model's without it
        self.backend_id = ids.pop() if len(ids) == 1 else models.pop()
        self.backends = list(backends)
        self.policy = (
            make_policy(policy, aging_rate=aging_rate) if isinstance(policy, str) else policy
        )
        self.cache = cache
        self.clock = clock
        self.fusion = fusion  # False only for ablations: identical requests then run again
        self.placement = make_placement(placement) if isinstance(placement, str) else placement
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
        self._pending: dict[str, Pending] = {}
        self._item_work: dict[QueuedSEU, list[Pending]] = {}
        self._running: dict[int, Running] = {}
        self._queries: dict[str, QueryState] = {}
        self._recent: OrderedDict[str, Completion] = OrderedDict()
        # a cancel may arrive before the query's requests do (a sidecar's cancel travels apart)
        self._cancelled: OrderedDict[str, None] = OrderedDict()
        self._dispatch_ids = itertools.count(1)
        self._submits = 0
        self._lock = threading.RLock()
        self._closed = False

    # -- the client contract -------------------------------------------------------------
    def submit(self, seu: SEU) -> Future[SEUResult]:
        return self.submit_with(seu, self.cache)

    def submit_with(self, seu: SEU, cache: LLMCache | None) -> Future[SEUResult]:
        """Submit ``seu`` on behalf of a connection whose cache is ``cache`` (None: no cache)."""
        future: Future[SEUResult] = SEUFuture()
        n = len(seu.requests)
        if n == 0:
            future.set_result(SEUResult((), ()))
            return future
        if seu.query_id in self._cancelled:  # read without the lock: checked again below
            future.set_exception(QueryCancelledError(f"query {seu.query_id} was cancelled"))
            return future
        sigs = signatures(seu.requests, self.backend_id)
        cached = cache.get_many(sigs) if cache is not None else {}
        with self._lock:
            if self._closed:
                raise SchedulerError("the scheduler is closed; open a new connection")
            if seu.query_id in self._cancelled:
                future.set_exception(QueryCancelledError(f"query {seu.query_id} was cancelled"))
                return future
            now = self.clock()
            state = self._state_locked(seu, now)
            waiter = Waiter(seu, future, [None] * n, [Served.BACKEND] * n, n, state, cache=cache)
            state.waiting += 1
            new_work: list[Pending] = []
            recent: dict[str, Completion] = {}
            for index, (sig, request) in enumerate(zip(sigs, seu.requests, strict=True)):
                hit = cached.get(sig)
                if hit is None and cache is not None and sig in self._recent:
                    hit = recent[sig] = self._recent[sig]  # answered for another connection
                if hit is not None:
                    fill(waiter, index, hit, Served.CACHE, self.usage)
                    continue
                key = sig if self.fusion else f"{sig}#{id(waiter)}#{index}"
                pending = self._pending.get(key)
                if pending is None:
                    pending = Pending(sig, request, request_tokens(request), key)
                    self._pending[key] = pending
                    new_work.append(pending)
                else:
                    if pending.item is not None and all(
                        w.seu.query_id != seu.query_id for w, _ in pending.waiters
                    ):
                        # priority summation: one more query waits on this queued request
                        pending.item.contribution += 1.0 / max(1, pending.item.size)
                        self.policy.update(pending.item)
                    if pending not in new_work:
                        waiter.served[index] = Served.FUSED
                pending.attach(waiter, index)
            if isinstance(future, SEUFuture) and not future.done():
                future.mark()  # its cache hits: what a listener hears first
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
        if recent and cache is not None:
            cache.put_many(recent)  # this connection's cache holds every answer it got
        return future

    def cancel(self, query_id: str) -> None:
        """Fail the query's waiting SEUs and drop its queued work that nobody else shares;
        SEUs of the query submitted later are refused.

        Running work that no other query waits on is aborted (``Backend.abort``; the executor
        stops between backend batches); what finishes anyway goes to the cache.
        """
        with self._lock:
            self._cancelled[query_id] = None
            self._cancelled.move_to_end(query_id)
            if len(self._cancelled) > _CANCELLED:
                self._cancelled.popitem(last=False)
            for pending in list(self._pending.values()):
                mine = [(w, i) for w, i in pending.waiters if w.seu.query_id == query_id]
                if not mine:
                    continue
                pending.waiters = [(w, i) for w, i in pending.waiters if w.seu.query_id != query_id]
                for waiter, _ in mine:
                    fail_waiter(waiter, QueryCancelledError(f"query {query_id} was cancelled"))
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
            aborts = abandon(self._running.values())
        abort_on_backends(aborts)

    def wanted(self, dispatch_id: int) -> bool:
        """False once every query waiting on the dispatch's remaining work was cancelled."""
        with self._lock:
            running = self._running.get(dispatch_id)
            return running is not None and not running.aborted

    def finish_query(self, query_id: str) -> None:
        """Mark a finished query done: ``status()`` shows it so, with nothing left, for
        ``DONE_SHOWN_S``, then forgets it (and its attained service)."""
        with self._lock:
            state = self._queries.get(query_id)
            if state is not None and not state.waiting and not state.queued:
                state.done_at = self.clock()

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
            caches: dict[int, LLMCache] = {}
            for pending in chunk:
                caches.update(pending.caches)
        for cache in caches.values():
            cache.put_many({p.signature: c for p, c in zip(chunk, completions, strict=True)})
        with self._lock:
            now = self.clock()
            replica = running.replica
            for pending, completion in zip(chunk, completions, strict=True):
                if self._pending.get(pending.key) is pending:
                    del self._pending[pending.key]
                if pending.caches and completion.error is None:
                    self._recent[pending.signature] = completion
                    if len(self._recent) > _RECENT:
                        self._recent.popitem(last=False)
                self._throughput.add(completion.prompt_tokens + completion.completion_tokens, now)
                for waiter, index in pending.waiters:
                    fill(waiter, index, completion, Served.BACKEND, self.usage)
                replica.requests -= 1
                replica.tokens -= pending.tokens
                replica.completed_requests += 1
            running.answered += len(chunk)
            if running.answered >= len(running.work):
                self._release_locked(running)
            partial = {id(w.future): w.future for p in chunk for w, _ in p.waiters
                       if isinstance(w.future, SEUFuture) and not w.future.done()}  # fmt: skip
            for future in partial.values():  # under the lock: the batches' order
                future.mark()
        for future in partial.values():  # outside the lock: a listener may take its time
            future.notify()

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
                    fail_waiter(waiter, naming(error, waiter.seu.operator, backend))
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
            prune_idle(self._queries, now)
            return status_snapshot(
                backend_id=self.backend_id,
                simulated=any(b.simulated for b in self.backends),
                policy=self.policy.name,
                uptime_s=now - self.started,
                queued=sorted(self.policy.items(), key=lambda i: i.seq),
                replicas=self.replicas,
                tokens_per_s=self._throughput.rate(now),
                queries=self._queries.values(),
                usage=self.usage,
                now=now,
            )

    # -- internals -------------------------------------------------------------------------
    def _state_locked(self, seu: SEU, now: float) -> QueryState:
        state = track_query(self._queries, seu, now)
        self._submits += 1
        if self._submits % 256 == 0:
            prune_idle(self._queries, now)
        return state

    def _release_locked(self, running: Running) -> None:
        del self._running[running.dispatch.dispatch_id]
        running.replica.dispatches -= 1
        if not self._closed:
            self._dispatch_locked()

    def _dispatch_locked(self) -> None:
        while len(self.policy):
            if least_loaded(self.replicas) is None:
                return  # no replica can take a dispatch
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
            prefix = work[0].request.prefix
            replica = self.placement.place(
                self.replicas, prefix=prefix, requests=len(work), tokens=tokens
            )
            if replica is None or not replica.admits(len(work), tokens):
                self._item_work[item] = work
                self.policy.push(item)
                return
            self.policy.dispatched(item, now)
            running = dispatch_work(
                next(self._dispatch_ids), item, work, replica=replica, owner=owner, now=now
            )
            self._running[running.dispatch.dispatch_id] = running
            self.executor.start(running.dispatch, replica.backend, self)
