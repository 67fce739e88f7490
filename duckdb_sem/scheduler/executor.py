"""Executors run the scheduler's dispatch decisions on backends.

The scheduler decides *what* runs *where* (a :class:`Dispatch`, like vLLM's scheduler output)
and an executor makes it happen, reporting back through :class:`DispatchSink`. The default
:class:`ThreadExecutor` calls ``Backend.complete`` on worker threads; tests and discrete-event
benchmarks use :class:`ManualExecutor` and fabricate completions on an injected clock, which
makes dispatch order fully deterministic.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from duckdb_sem.backends.base import Backend
from duckdb_sem.errors import QueryCancelledError, SchedulerError, SemError
from duckdb_sem.llm.request import Completion, LLMRequest

__all__ = ["Dispatch", "DispatchSink", "Executor", "ManualExecutor", "ThreadExecutor"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Dispatch:
    """One scheduling decision: this SEU's new (unique, uncached) work goes to this replica."""

    dispatch_id: int
    replica: int
    query_id: str
    operator: str
    requests: tuple[LLMRequest, ...]
    signatures: tuple[str, ...]
    tokens: int  # estimated, for admission
    at: float  # scheduler clock when dispatched


class DispatchSink(Protocol):
    def complete(
        self, dispatch_id: int, completions: Sequence[Completion], offset: int = 0
    ) -> None:
        """Answers for ``requests[offset : offset + len(completions)]`` of that dispatch."""

    def fail(self, dispatch_id: int, error: BaseException) -> None: ...

    def wanted(self, dispatch_id: int) -> bool:
        """False once nobody waits on the dispatch's remaining work (stop between batches)."""


class Executor(Protocol):
    def start(self, dispatch: Dispatch, backend: Backend, sink: DispatchSink) -> None:
        """Begin running ``dispatch`` (must not block on the backend)."""

    def close(self) -> None: ...


class ThreadExecutor:
    """Runs each dispatch on a worker thread, in backend batches of ``capacity().max_batch``
    (one request per call for a backend that answers one by one: ``capacity().one_by_one``)."""

    def __init__(self, workers: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="sem-llm")

    def start(self, dispatch: Dispatch, backend: Backend, sink: DispatchSink) -> None:
        self._pool.submit(self._run, dispatch, backend, sink)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    @staticmethod
    def _run(dispatch: Dispatch, backend: Backend, sink: DispatchSink) -> None:
        capacity = backend.capacity()
        max_batch = 1 if capacity.one_by_one else max(1, capacity.max_batch)
        try:
            for start in range(0, len(dispatch.requests), max_batch):
                if not sink.wanted(dispatch.dispatch_id):
                    # every query waiting on the rest was cancelled: release it unrun
                    sink.fail(dispatch.dispatch_id, QueryCancelledError("dispatch aborted"))
                    return
                chunk = dispatch.requests[start : start + max_batch]
                results = backend.complete(chunk)
                if len(results) != len(chunk):
                    raise SchedulerError(
                        f"backend {backend.describe()} returned {len(results)} answers "
                        f"for {len(chunk)} requests"
                    )
                sink.complete(dispatch.dispatch_id, results, start)
        except Exception as err:  # noqa: BLE001 - any failure must reach the waiters
            failure = (
                err
                if isinstance(err, SemError)
                else SchedulerError(
                    f"backend {backend.describe()} failed: {type(err).__name__}: {err}"
                )
            )
            log.warning("backend batch failed: %s", failure)
            sink.fail(dispatch.dispatch_id, failure)


class ManualExecutor:
    """Records dispatches; the test (or simulation) completes them when it decides."""

    def __init__(self) -> None:
        self.started: list[Dispatch] = []
        self.running: dict[int, Dispatch] = {}
        self.sink: DispatchSink | None = None

    def start(self, dispatch: Dispatch, backend: Backend, sink: DispatchSink) -> None:
        self.sink = sink
        self.started.append(dispatch)
        self.running[dispatch.dispatch_id] = dispatch

    def finish(self, dispatch: Dispatch, completions: Sequence[Completion]) -> None:
        assert self.sink is not None
        self.running.pop(dispatch.dispatch_id, None)
        self.sink.complete(dispatch.dispatch_id, completions)

    def close(self) -> None:
        pass
