"""The one submit path: SEUs cut to size, the remaining cost on each, a budget over every LLM
model's calls, and each kind of work counted in its own counters."""

from __future__ import annotations

from concurrent.futures import Future

import pytest

from duckdb_sem.errors import BudgetExceededError, QueryCancelledError
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import Completion, LLMRequest, OperatorKind
from duckdb_sem.runtime.budget import Budget
from duckdb_sem.runtime.context import QueryContext
from duckdb_sem.runtime.submit import COMPLETIONS, EMBEDDINGS, HELPER, submit
from duckdb_sem.scheduler.seu import SEU, Served, SEUResult


class Recorder:
    """A scheduler client that answers at once and keeps every SEU it was sent."""

    backend_id = "recorder"

    def __init__(self, served: Served = Served.BACKEND) -> None:
        self.seus: list[SEU] = []
        self.served = served
        self.cancelled: list[str] = []

    def submit(self, seu: SEU) -> Future[SEUResult]:
        self.seus.append(seu)
        done: Future[SEUResult] = Future()
        answers = tuple(Completion(True, "yes", 3, 1) for _ in seu.requests)
        done.set_result(SEUResult(answers, tuple(self.served for _ in seu.requests)))
        return done

    def cancel(self, query_id: str) -> None:
        self.cancelled.append(query_id)

    def close(self) -> None:
        pass


def _items(n: int) -> list[tuple[str, LLMRequest]]:
    requests = [build_request(OperatorKind.FILTER, f"row {i} is fine") for i in range(n)]
    return [(r.signature("recorder"), r) for r in requests]


def test_requests_go_as_seus_of_the_batch_size_with_the_remaining_cost() -> None:
    client, query = Recorder(), QueryContext()
    answered = submit(client, _items(10), query=query, label="sem_filter", ledger=COMPLETIONS,
                      batch_size=4, remaining=lambda i: 100.0 - i)  # fmt: skip
    assert [len(s.requests) for s in client.seus] == [4, 4, 2]
    assert [s.remaining_cost for s in client.seus] == [100.0, 96.0, 92.0]
    assert len(answered) == 10
    stats = query.stats()
    assert stats.physical_calls == 10 and stats.physical_prompt_tokens == 30 and stats.seus == 3
    query.remaining_cost = 500.0  # a planned query's estimate wins when larger
    submit(client, _items(1), query=query, label="x", ledger=COMPLETIONS, batch_size=4)
    assert client.seus[-1].remaining_cost == 500.0


def test_each_kind_of_work_has_its_own_counters() -> None:
    query = QueryContext()
    submit(Recorder(), _items(3), query=query, label="h", ledger=HELPER, batch_size=8)
    submit(Recorder(Served.CACHE), _items(2), query=query, label="e", ledger=EMBEDDINGS,
           batch_size=8)  # fmt: skip
    stats = query.stats()
    assert stats.helper_physical_calls == 3 and stats.physical_calls == 0
    assert stats.embed_cache_hits == 2 and stats.cache_hits == 0


def test_the_budget_bounds_every_model_s_llm_calls_but_not_embeddings() -> None:
    query = QueryContext(budget=Budget(max_llm_calls=5))
    submit(Recorder(), _items(4), query=query, label="h", ledger=HELPER, batch_size=8)
    submit(Recorder(), _items(8), query=query, label="e", ledger=EMBEDDINGS, batch_size=8)
    with pytest.raises(BudgetExceededError, match="max_llm_calls=5"):
        submit(Recorder(), _items(2), query=query, label="f", ledger=COMPLETIONS, batch_size=8)
    cached = Recorder()
    submit(cached, _items(2), query=query, label="f", ledger=COMPLETIONS, batch_size=8,
           cached=lambda sigs: set(sigs))  # fmt: skip  # all in the cache: nothing to bound
    assert len(cached.seus) == 1


def test_a_cancelled_query_stops_and_drops_its_work() -> None:
    client, query = Recorder(), QueryContext()
    query.cancelled.set()
    with pytest.raises(QueryCancelledError):
        submit(client, _items(2), query=query, label="f", ledger=COMPLETIONS, batch_size=8)
    assert client.cancelled == [query.query_id]
