"""Builders for deterministic scheduler tests: a fake backend, an injected clock, fabricated
completions (the vLLM v1 scheduler-test recipe: build, feed outputs, assert the dispatch order)."""

from __future__ import annotations

from collections.abc import Sequence

from duckdb_sem.backends.base import Backend, Capacity
from duckdb_sem.cache.store import LLMCache
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import Completion, LLMRequest, OperatorKind
from duckdb_sem.scheduler.admission import ReplicaLimits
from duckdb_sem.scheduler.core import Scheduler
from duckdb_sem.scheduler.executor import Dispatch, ManualExecutor
from duckdb_sem.scheduler.policies import Policy
from duckdb_sem.scheduler.seu import SEU


class FakeBackend(Backend):
    """Never called: the ManualExecutor stands in for it. Only identity and capacity matter."""

    spec = "fake:"

    def __init__(self, *, max_batch: int = 64, concurrent: int = 1) -> None:
        self._cap = Capacity(max_batch=max_batch, max_concurrent_batches=concurrent)

    @property
    def backend_id(self) -> str:
        return "fake:model"

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        raise AssertionError("the manual executor runs dispatches in these tests")

    def capacity(self) -> Capacity:
        return self._cap

    def count_tokens(self, text: str) -> int:
        return len(text.split())


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Harness:
    """A scheduler on a manual executor and a fake clock."""

    def __init__(
        self,
        policy: Policy | str = "fcfs",
        *,
        replicas: int = 1,
        dispatches: int = 1,
        max_requests: int = 10_000,
        max_tokens: int | None = None,
        cache: LLMCache | None = None,
        aging_rate: float | None = None,
    ) -> None:
        self.clock = Clock()
        self.executor = ManualExecutor()
        backends = [FakeBackend() for _ in range(replicas)]
        limits = [ReplicaLimits(dispatches, max_requests, max_tokens) for _ in backends]
        self.scheduler = Scheduler(
            backends,
            policy=policy,
            cache=cache,
            clock=self.clock,
            executor=self.executor,
            limits=limits,
            aging_rate=aging_rate,
        )

    def submit(self, query_id: str, rows: Sequence[str], *, cost: float = 0.0, op: str = "f"):  # type: ignore[no-untyped-def]
        requests = tuple(build_request(OperatorKind.FILTER, r) for r in rows)
        return self.scheduler.submit(SEU(query_id, op, requests, cost, "c"))

    def finish_next(self) -> Dispatch:
        """Complete the oldest running dispatch with fabricated answers."""
        dispatch = next(iter(self.executor.running.values()))
        self.executor.finish(dispatch, [answer(r) for r in dispatch.requests])
        return dispatch

    def run_all(self, step: float = 1.0) -> list[str]:
        """Complete dispatches one by one (``step`` seconds each); the query order they ran in."""
        order = []
        while self.executor.running:
            self.clock.advance(step)
            order.append(self.finish_next().query_id)
        return order

    @property
    def dispatched(self) -> list[str]:
        return [d.query_id for d in self.executor.started]


def answer(request: LLMRequest) -> Completion:
    yes = "good" in request.row
    return Completion(yes, "yes" if yes else "no", len(request.row.split()) + 10, 1)


def rows(prefix: str, n: int) -> list[str]:
    return [f"{prefix} row {i}" for i in range(n)]
