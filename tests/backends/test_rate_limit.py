"""Rate limits: the token buckets on an injected clock, and the ``openai:`` client against a
SIMULATED server that enforces its own limit with HTTP 429 and ``Retry-After``."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import httpx
import pytest
from processes import stop

from duckdb_sem.backends.openai import OpenAIBackend
from duckdb_sem.backends.rate_limit import RateLimit, RateLimiter, chat_cost, limit_from_spec
from duckdb_sem.backends.registry import create_backend, parse_spec
from duckdb_sem.backends.retry import TransportRetry
from duckdb_sem.backends.sim.backend import create
from duckdb_sem.backends.sim.server import SimServer
from duckdb_sem.errors import BackendError, ConfigError
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import LLMRequest, OperatorKind


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_requests_bucket_holds_one_second_and_refills() -> None:
    clock = _Clock()
    limiter = RateLimiter(RateLimit(rpm=300), clock=clock, sleep=clock.sleep)  # 5 a second
    assert [limiter.reserve() for _ in range(5)] == [0.0] * 5
    assert limiter.reserve() == pytest.approx(0.2)
    clock.now = 1.0  # a full second refills the bucket, never past its size
    assert [limiter.reserve() for _ in range(6)] == [0.0] * 5 + [pytest.approx(0.2)]
    limiter.acquire()
    assert clock.slept == [pytest.approx(0.2)] and limiter.waited_s == pytest.approx(0.2)


def test_tokens_bucket_delays_a_large_request_and_charges_usage_above_the_estimate() -> None:
    clock = _Clock()
    limiter = RateLimiter(RateLimit(tpm=6000), clock=clock, sleep=clock.sleep)  # 100 a second
    assert limiter.reserve(500) == 0.0  # above a full bucket: let through, the bucket in debt
    assert limiter.reserve(50) == pytest.approx(4.5)  # (50 - (100 - 500)) / 100
    limiter.settle(500, 20)  # counted less than reserved: nothing comes back
    assert limiter.reserve(50) == pytest.approx(4.5)
    limiter.settle(500, 600)  # counted more: the rest is charged
    assert limiter.reserve(50) == pytest.approx(5.5)


def test_acquire_stops_when_aborted() -> None:
    clock = _Clock()
    limiter = RateLimiter(RateLimit(rpm=60), clock=clock, sleep=clock.sleep)
    limiter.acquire()
    with pytest.raises(BackendError, match="aborted while waiting on its rate limit"):
        limiter.acquire(stop=lambda: True, what="openai:x")


def test_spec_options_and_bad_values() -> None:
    spec = parse_spec("openai:http://h/v1?model=m&rpm=600&tpm=90000")
    assert limit_from_spec(spec) == RateLimit(rpm=600.0, tpm=90000.0)
    assert limit_from_spec(parse_spec("openai:http://h/v1")).unlimited
    with pytest.raises(ConfigError, match="rpm= and tpm= must be >= 0"):
        limit_from_spec(parse_spec("openai:http://h/v1?rpm=-1"))
    with pytest.raises(ConfigError, match="requests per minute"):
        RateLimit(rpm=float("inf"))
    body = {"messages": [{"role": "user", "content": "abcd" * 10}], "max_tokens": 7}
    assert chat_cost(body) > 7


_SIM = "sim:default?selectivity=0.4&seed=3"


def _served(rpm: float) -> SimServer:
    return SimServer(create(_SIM), rate_limit=RateLimit(rpm=rpm)).start()


def _expected(requests: list[LLMRequest]) -> list[object]:
    """The answers of the same simulated model asked directly (no HTTP, no limit)."""
    direct = create_backend(_SIM)
    try:
        return [c.value for c in direct.complete(requests)]
    finally:
        direct.close()


@pytest.mark.integration
def test_client_under_the_server_limit_sees_no_429() -> None:
    server = _served(rpm=600)  # 10 a second
    requests = [build_request(OperatorKind.FILTER, f"review {i}") for i in range(18)]
    remote = create_backend(f"openai:{server.base_url}?rpm=480")  # 8 a second
    try:
        assert isinstance(remote, OpenAIBackend) and remote.rate_limiter is not None
        answers = [c.value for c in remote.complete(requests)]
        assert answers == _expected(requests)
        assert server.rate_limited == 0 and server.answered == len(requests)
        assert remote.rate_limiter.waited_s > 0  # it did hold requests back
    finally:
        remote.close()
        server.close()
        server.backend.close()


@pytest.mark.integration
def test_without_a_client_limit_429s_are_retried_to_the_right_answers() -> None:
    server = _served(rpm=600)
    requests = [build_request(OperatorKind.FILTER, f"review {i}") for i in range(24)]
    # one HTTP request a row: a burst of 24 requests over a limit of 10 a second
    remote = create_backend(f"openai:{server.base_url}?concurrency=24&batch=off")
    try:
        answers = [c.value for c in remote.complete(requests)]
        assert answers == _expected(requests)  # none lost, none wrong
        assert server.rate_limited > 0  # the burst was refused in part, then retried
        assert server.answered == len(requests)
    finally:
        remote.close()
        server.close()
        server.backend.close()


@pytest.mark.integration
def test_cli_sim_server_answers_429_with_retry_after() -> None:
    code = "from duckdb_sem.cli.main import main; main()"
    cmd = [sys.executable, "-c", code, "sim-server", "--profile", "tiny", "--listen",
           "127.0.0.1:0", "--rpm", "60"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        found = re.search(r"(http://127\.0\.0\.1:\d+/v1)", proc.stderr.readline())
        assert found, "sim-server did not report its address"
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        with httpx.Client(timeout=10) as client:
            first = client.post(found.group(1) + "/chat/completions", json=body)
            second = client.post(found.group(1) + "/chat/completions", json=body)
        assert first.status_code == 200
        assert second.status_code == 429 and second.headers["retry-after"] == "1"
        assert "rate limit" in second.json()["error"]["message"]
    finally:
        stop(proc)


@pytest.mark.integration
def test_client_tokens_limit_under_the_servers_sees_no_429() -> None:
    requests = [build_request(OperatorKind.FILTER, f"review number {i} " * 4) for i in range(10)]
    body_cost = chat_cost({"messages": [{"content": requests[0].prefix}, {"content": requests[0].row}],
                           "max_tokens": 1})  # fmt: skip
    per_second = 6 * body_cost  # the server takes about 6 of these a second
    server = SimServer(create(_SIM), rate_limit=RateLimit(tpm=per_second * 60)).start()
    remote = create_backend(f"openai:{server.base_url}?tpm={per_second * 60 * 0.75}")
    try:
        assert [c.value for c in remote.complete(requests)] == _expected(requests)
        assert server.rate_limited == 0 and server.answered == len(requests)
    finally:
        remote.close()
        server.close()
        server.backend.close()


def test_waiting_on_the_limit_is_not_spent_from_the_retry_budget() -> None:
    """Three 503s, then an answer: on a 120 rpm limit (two at once, then one each 0.5 s) the
    third and fourth tries wait 0.5 s each, more than the whole 0.3 s retry budget, yet the
    request is still retried to its answer."""
    tries: list[float] = []

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m", "owned_by": "other"}]})
        tries.append(time.monotonic())
        if len(tries) < 4:
            return httpx.Response(503, json={"error": {"message": "busy"}})
        top = [{"token": "yes", "logprob": -0.1}, {"token": "no", "logprob": -2.5}]
        content = [{"token": "yes", "logprob": -0.1, "top_logprobs": top}]
        choice = {
            "message": {"role": "assistant", "content": "yes"},
            "logprobs": {"content": content},
        }
        return httpx.Response(200, json={"choices": [choice], "usage": {"total_tokens": 5}})

    backend = OpenAIBackend(
        "http://127.0.0.1:1/v1", transport=httpx.MockTransport(handle),
        rate_limit=RateLimit(rpm=120),
        transport_retry=TransportRetry(retries=4, backoff_s=0.0, budget_s=0.3, jitter=False),
    )  # fmt: skip
    try:
        (done,) = backend.complete([build_request(OperatorKind.FILTER, "a row")])
        assert done.value is True and len(tries) == 4
        assert tries[3] - tries[0] >= 0.9  # the limit spaced the tries out
    finally:
        backend.close()
