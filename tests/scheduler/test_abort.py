"""``Scheduler.cancel`` reaches ``Backend.abort`` and stops a running dispatch between batches."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from duckdb_sem.backends.base import Answers, Backend, Capacity
from duckdb_sem.errors import QueryCancelledError
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import Completion, LLMRequest, OperatorKind
from duckdb_sem.scheduler.core import Scheduler
from duckdb_sem.scheduler.seu import SEU


class BlockingBackend(Backend):
    """Each batch blocks until released or aborted; records what it was asked."""

    spec = "blocking:"

    def __init__(self) -> None:
        self.answers = Answers(kind="blocking", model="m")
        self.batches: list[list[str]] = []
        self.aborted: list[str] = []
        self.started = threading.Event()
        self.release = threading.Event()

    def capacity(self) -> Capacity:
        return Capacity(max_batch=4)

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        self.batches.append([r.row for r in requests])
        self.started.set()
        self.release.wait(timeout=10)
        aborted = {r.row for r in requests} & set(self.aborted)
        return [
            Completion(None, "", 0, 0, error="aborted")
            if r.row in aborted
            else Completion(True, "yes", 1, 1)
            for r in requests
        ]

    def abort(self, requests: Sequence[LLMRequest]) -> None:
        self.aborted.extend(r.row for r in requests)
        self.release.set()


def _seu(query: str, rows: int) -> SEU:
    requests = tuple(build_request(OperatorKind.FILTER, f"{query} row {i}") for i in range(rows))
    return SEU(query, "sem_filter#1", requests, remaining_cost=rows)


def test_cancel_aborts_the_running_dispatch_and_skips_its_other_batches() -> None:
    backend = BlockingBackend()
    scheduler = Scheduler([backend], policy="fcfs")
    try:
        future = scheduler.submit(_seu("a", 12))  # three backend batches of 4
        assert backend.started.wait(timeout=10)
        scheduler.cancel("a")
        with pytest.raises(QueryCancelledError):
            future.result(timeout=10)
        assert backend.aborted == [f"a row {i}" for i in range(12)]
        scheduler.close()  # waits for the worker: it must not have run batches 2 and 3
        assert len(backend.batches) == 1
    finally:
        backend.release.set()
        scheduler.close()


def test_work_another_query_waits_on_is_not_aborted() -> None:
    backend = BlockingBackend()
    scheduler = Scheduler([backend], policy="fcfs")
    try:
        mine = scheduler.submit(_seu("a", 4))
        assert backend.started.wait(timeout=10)
        theirs = scheduler.submit(SEU("b", "sem_filter#1", _seu("a", 4).requests))  # fused
        scheduler.cancel("a")
        assert backend.aborted == []
        backend.release.set()
        assert [c.value for c in theirs.result(timeout=10).completions] == [True] * 4
        with pytest.raises(QueryCancelledError):
            mine.result(timeout=10)
    finally:
        backend.release.set()
        scheduler.close()
