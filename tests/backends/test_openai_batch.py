"""The ``openai:`` backend's batch requests (vLLM's ``/v1/chat/completions/batch``): the same
answers as one request a row, in fewer HTTP requests; fallbacks where a server lacks the route
or refuses a batch."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sim_serving import sim_serving

import duckdb_sem
from duckdb_sem.backends.openai import OpenAIBackend
from duckdb_sem.backends.openai_batch import chunks, shares, split_answer
from duckdb_sem.backends.registry import create_backend
from duckdb_sem.backends.sim.server import SimServer
from duckdb_sem.errors import BackendError
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import Completion, LLMRequest, OperatorKind
from duckdb_sem.llm.template import parse_template
from duckdb_sem.testing.fault_proxy import FaultProxy, fail_first

TEMPLATE = parse_template("Is this review favourable? {text}").positional()


@pytest.fixture
def server() -> Iterator[SimServer]:
    with sim_serving("sim:default?selectivity=0.4&seed=3") as server:
        yield server


def _requests() -> list[LLMRequest]:
    decide = [
        build_request(OperatorKind.FILTER, TEMPLATE.render([f"film {i} was {w}"]),
                      template=TEMPLATE)
        for i, w in enumerate(["fine", "dull", "great", "long", "odd"] * 5)
    ]  # fmt: skip
    counts = [
        build_request(OperatorKind.MAP, f"How many actors in film {i}?", output_type="INTEGER")
        for i in range(7)
    ]
    labels = [
        build_request(OperatorKind.MAP, f"Genre of film {i}?", labels=("drama", "comedy"))
        for i in range(6)
    ]
    return decide + counts + labels


def _answers(out: list[Completion]) -> list[tuple[Any, float | None, str | None]]:
    return [(c.value, c.score, c.error) for c in out]


def test_batched_rows_answer_as_one_request_a_row_does(server: SimServer) -> None:
    requests = _requests()
    rows = create_backend(f"openai:{server.base_url}?batch=off")
    one_by_one = rows.complete(requests)
    rows.close()
    assert server.batch_requests == 0
    singles = server.answered

    batched_backend = create_backend(f"openai:{server.base_url}?batch_rows=10")
    assert isinstance(batched_backend, OpenAIBackend) and batched_backend.batching
    batched = batched_backend.complete(requests)
    batched_backend.close()

    assert _answers(batched) == _answers(one_by_one)
    assert all(c.error is None for c in batched)
    assert {c.value for c in batched[:25]} == {True, False}
    assert {type(c.value) for c in batched[25:32]} == {int}
    assert {c.value for c in batched[32:]} <= {"drama", "comedy"}
    # 25 decisions in batches of at most 10 (3), 7 counts (1), 6 labels (1); the template's
    # calibration rows (content-free and irrelevant texts) go one a row
    assert server.batch_requests == 5
    # the server's token totals are kept, shared out over the rows
    assert sum(c.prompt_tokens for c in batched) == sum(c.prompt_tokens for c in one_by_one)
    assert sum(c.completion_tokens for c in batched) == sum(c.completion_tokens for c in one_by_one)
    assert server.answered > singles


def test_a_sql_query_over_the_sim_server_sends_batches(server: SimServer) -> None:
    sql = (
        "SELECT i FROM range(40) t(i) "
        "WHERE sem_filter('Is review number {i} favourable?') ORDER BY i"
    )
    got = {}
    for batch in ("off", "on"):
        before = server.batch_requests
        con = duckdb_sem.connect(
            backend=f"openai:{server.base_url}?batch={batch}", cache="off", batch_size=16
        )
        try:
            got[batch] = con.sql(sql).fetchall()
        finally:
            con.close()
        sent = server.batch_requests - before
        assert (sent == 0) if batch == "off" else (sent >= 3), (batch, sent)
    assert got["on"] == got["off"] and 0 < len(got["on"]) < 40


def _mock(batch_status: int, seen: list[str]) -> OpenAIBackend:
    """A vLLM-like server whose batch route answers ``batch_status`` (404: a vLLM before the
    route); single chat requests say yes to rows containing "good"."""

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m", "owned_by": "vllm"}]})
        seen.append(request.url.path)
        if request.url.path.endswith("/batch"):
            return httpx.Response(batch_status, json={"detail": "refused"})
        row = json.loads(request.content)["messages"][-1]["content"]
        margin = 2.0 if "good" in row else -2.0
        top = [{"token": "yes", "logprob": margin / 2}, {"token": "no", "logprob": -margin / 2}]
        choice = {
            "message": {"role": "assistant", "content": "yes"},
            "logprobs": {"content": [{"token": "yes", "logprob": 0.0, "top_logprobs": top}]},
        }
        usage = {"prompt_tokens": 9, "completion_tokens": 1}
        return httpx.Response(200, json={"choices": [choice], "usage": usage})

    return OpenAIBackend("http://127.0.0.1:1/v1", transport=httpx.MockTransport(handle))


def test_a_server_without_the_batch_route_gets_one_request_a_row(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[str] = []
    backend = _mock(404, seen)
    requests = [build_request(OperatorKind.FILTER, f"row {i} is {'good' if i % 2 else 'bad'}")
                for i in range(6)]  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="duckdb_sem.backends.openai"):
        first = backend.complete(requests)
        second = backend.complete(requests)
    backend.close()
    assert [c.value for c in first] == [c.value for c in second] == [False, True] * 3
    assert not backend.batching
    assert seen.count("/v1/chat/completions/batch") == 1  # asked once, then never again
    assert seen.count("/v1/chat/completions") == 12
    warnings = [r.getMessage() for r in caplog.records if "no batch route" in r.getMessage()]
    assert len(warnings) == 1 and "batch=off" in warnings[0]


def test_a_refused_batch_is_answered_row_by_row() -> None:
    seen: list[str] = []
    backend = _mock(422, seen)
    requests = [build_request(OperatorKind.FILTER, f"row {i} is good") for i in range(4)]
    out = backend.complete(requests)
    backend.close()
    assert [c.value for c in out] == [True] * 4
    assert backend.batching  # a refusal is this batch's, not the server's lack of the route
    assert seen == ["/v1/chat/completions/batch"] + ["/v1/chat/completions"] * 4


def test_a_batch_answer_with_the_wrong_choices_is_a_clear_error() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m", "owned_by": "vllm"}]})
        choice = {"index": 0, "message": {"role": "assistant", "content": "yes"}}
        return httpx.Response(200, json={"choices": [choice], "usage": {}})

    backend = OpenAIBackend("http://127.0.0.1:1/v1", transport=httpx.MockTransport(handle))
    requests = [build_request(OperatorKind.MAP, f"row {i}") for i in range(3)]
    with pytest.raises(BackendError, match="unreadable batch answer: 1 choices for 3"):
        backend.complete(requests)
    backend.close()


def test_split_answer_orders_choices_by_index_and_keeps_the_usage_totals() -> None:
    bodies = [{"messages": [{"role": "user", "content": "x" * n}]} for n in (40, 400, 4)]
    choices = [{"index": i, "message": {"content": t}} for i, t in ((2, "c"), (0, "a"), (1, "bb"))]
    usage = {"prompt_tokens": 130, "completion_tokens": 7,
             "prompt_tokens_details": {"cached_tokens": 50}}  # fmt: skip
    parts = split_answer({"choices": choices, "usage": usage}, bodies)
    assert [p["choices"][0]["message"]["content"] for p in parts] == ["a", "bb", "c"]
    assert sum(p["usage"]["prompt_tokens"] for p in parts) == 130
    assert sum(p["usage"]["completion_tokens"] for p in parts) == 7
    assert sum(p["usage"]["prompt_tokens_details"]["cached_tokens"] for p in parts) == 50
    prompt = [p["usage"]["prompt_tokens"] for p in parts]
    assert prompt[1] > prompt[0] > prompt[2]  # in proportion to the conversations' lengths
    with pytest.raises(ValueError, match="index 5"):
        split_answer({"choices": [{"index": 5}, *choices[1:]], "usage": usage}, bodies)


def test_chunks_and_shares() -> None:
    assert [len(r) for r in chunks(130, 64)] == [44, 43, 43]
    assert [len(r) for r in chunks(64, 64)] == [64]
    assert chunks(0, 64) == []
    assert sorted(shares(7, [1, 1, 1])) == [2, 2, 3]
    assert sum(shares(101, [3, 0, 9, 1])) == 101
    assert shares(5, [0, 0]) in ([3, 2], [2, 3])


@pytest.mark.integration
def test_abort_cuts_off_a_batch_in_flight(server: SimServer) -> None:
    with FaultProxy(server.base_url, plan=fail_first(10**6, "hang"), hang_s=30) as proxy:
        backend = create_backend(f"openai:{proxy.base_url}/v1?timeout=30&retries=0")
        requests = [build_request(OperatorKind.FILTER, f"row {i} is good") for i in range(5)]
        out: list[Completion] = []
        worker = threading.Thread(target=lambda: out.extend(backend.complete(requests)))
        worker.start()
        deadline = time.monotonic() + 5
        while "/v1/chat/completions/batch" not in proxy.paths and time.monotonic() < deadline:
            time.sleep(0.01)  # sent as one batch, and held by the proxy
        aborted = time.monotonic()
        backend.abort(requests)
        worker.join(timeout=10)
        took = time.monotonic() - aborted
        backend.close()
    assert not worker.is_alive() and took < 5, f"abort took {took:.1f} s (the hang is 30 s)"
    assert [c.error for c in out] == ["aborted"] * 5
