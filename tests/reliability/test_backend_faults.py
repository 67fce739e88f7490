"""Backend faults: retried with backoff within a budget, then an error naming backend and operator.

Faults are injected twice over: inside the SIMULATED backend (``sim:...?fault=...``) and on the
wire by :class:`~duckdb_sem.testing.FaultProxy` in front of the real sim HTTP server, reached
by the ``openai:`` client. Never a silently wrong or missing row: a query either returns what a
fault-free run returns, or raises.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sim_serving import sim_serving

import duckdb_sem
from duckdb_sem.backends.registry import create_backend
from duckdb_sem.backends.retry import Transient, TransportRetry, call_with_retry
from duckdb_sem.backends.sim.backend import create
from duckdb_sem.backends.sim.server import SimServer
from duckdb_sem.errors import (
    BackendError,
    BackendTimeoutError,
    BackendUnavailableError,
    ConfigError,
)
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import Completion, OperatorKind
from duckdb_sem.testing import Exchange, FaultProxy, fail_every, fail_first

SQL = (
    "SELECT i, sem_filter('{0} is good', 'row ' || i::VARCHAR) AS ok FROM range(40) t(i) ORDER BY i"
)
MAP_SQL = (
    "SELECT i, sem_map('Rate {0}', 'row ' || i::VARCHAR, 'INTEGER') AS n FROM range(12) t(i) "
    "ORDER BY i"
)
FAST = "retry_backoff=0.001"


def _run(backend: str, sql: str = SQL, **kwargs: object) -> list[tuple[object, ...]]:
    con = duckdb_sem.connect(backend=backend, **kwargs)  # type: ignore[arg-type]
    try:
        return con.sql(sql).fetchall()
    finally:
        con.close()


# -- the shared policy ------------------------------------------------------------------------
def test_backoff_doubles_up_to_its_cap_and_honours_retry_after() -> None:
    policy = TransportRetry(retries=6, backoff_s=0.5, max_backoff_s=3.0, jitter=False)
    assert [policy.delay(n) for n in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert policy.delay(0, retry_after=7.0) == 7.0
    jittered = TransportRetry(backoff_s=1.0)
    assert all(0.5 <= jittered.delay(0) <= 1.0 for _ in range(50))


def test_retries_stop_at_the_count_and_at_the_time_budget() -> None:
    now = [0.0]
    waits: list[float] = []

    def sleep(s: float) -> None:
        waits.append(s)
        now[0] += s

    def always(_attempt: int) -> None:
        raise Transient(BackendUnavailableError("x: reset"))

    policy = TransportRetry(retries=3, backoff_s=1.0, max_backoff_s=100, budget_s=1e9, jitter=False)
    with pytest.raises(BackendUnavailableError, match=r"x: reset \(tried 4 time"):
        call_with_retry(always, policy=policy, what="x", clock=lambda: now[0], sleep=sleep)
    assert waits == [1.0, 2.0, 4.0]
    waits.clear()
    budget = TransportRetry(
        retries=100, backoff_s=1.0, max_backoff_s=100, budget_s=10, jitter=False
    )
    with pytest.raises(BackendUnavailableError):
        call_with_retry(always, policy=budget, what="x", clock=lambda: now[0], sleep=sleep)
    assert waits == [1.0, 2.0, 4.0] and sum(waits) <= 10  # the next wait (8 s) would exceed it


def test_an_aborted_request_stops_retrying() -> None:
    calls: list[int] = []

    def fail(attempt: int) -> None:
        calls.append(attempt)
        raise Transient(BackendError("x: HTTP 503"))

    with pytest.raises(BackendError):
        call_with_retry(fail, policy=TransportRetry(backoff_s=0), what="x", stop=lambda: True)
    assert calls == [0]


# -- faults inside the SIMULATED backend ---------------------------------------------------------
@pytest.mark.parametrize("fault", ["timeout", "reset", "429", "500", "truncate"])
def test_transient_sim_faults_are_retried_to_the_fault_free_answer(fault: str) -> None:
    clean = _run("sim:tiny?selectivity=0.4", cache="off")
    faulty = f"sim:tiny?selectivity=0.4&fault={fault}&fail_rate=0.5&retries=8&{FAST}"
    assert _run(faulty, cache="off", batch_size=4) == clean
    assert _run(faulty.replace("tiny?", "tiny?output_words=3&"), MAP_SQL, cache="off") == _run(
        "sim:tiny?selectivity=0.4&output_words=3", MAP_SQL, cache="off"
    )


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ("timeout", BackendTimeoutError),
        ("reset", BackendUnavailableError),
        ("503", BackendError),
        ("truncate", BackendError),
    ],
)
def test_persistent_sim_faults_end_in_an_error_naming_backend_and_operator(
    fault: str, error: type[BackendError]
) -> None:
    spec = f"sim:tiny?fault={fault}&fail_rate=1&retries=2&{FAST}"
    with pytest.raises(error) as info:
        _run(spec, cache="off")
    message = str(info.value)
    assert spec in message and "SIMULATED" in message  # the backend
    assert "sem_filter" in message  # the operator
    assert "tried 3 time(s)" in message  # the policy's bound


def test_a_hanging_backend_times_out_within_its_bound() -> None:
    spec = f"sim:tiny?fault=hang&fail_rate=1&hang_s=0.3&retries=1&{FAST}"
    started = time.monotonic()
    with pytest.raises(BackendTimeoutError, match=r"hung for 0\.3 s"):
        _run(spec, cache="off")
    assert time.monotonic() - started < 5


def test_unknown_fault_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="fault='boom'"):
        create("sim:tiny?fault=boom")


def test_a_rerun_after_a_failed_query_resumes_from_the_cache(tmp_path: Path) -> None:
    cache = tmp_path / "cache.sqlite"
    # retries=0: some SEUs (8 rows each) fail for good and end the query part-way.
    with pytest.raises(BackendError):
        _run(
            f"sim:tiny?seed=4&fault=500&fail_rate=0.3&retries=0&{FAST}",
            cache=str(cache),
            batch_size=8,
        )
    with sqlite3.connect(cache) as db:
        (done,) = db.execute("SELECT count(*) FROM completions").fetchone()
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert 0 < done < 40, "the seed should fail the query part-way"
    # the fault options do not change answers, so the fault-free backend shares the cache
    con = duckdb_sem.connect(backend="sim:tiny?seed=4", cache=str(cache), batch_size=8)
    assert con.sql(SQL).fetchall() == _run("sim:tiny?seed=4", cache="off")  # nothing wrong or lost
    stats = con.stats()
    assert stats.cache_hits == done and stats.physical_calls == 40 - done


# -- faults on the wire: the openai: client through a proxy to the real sim server --------------
@pytest.fixture
def sim_server() -> Iterator[SimServer]:
    with sim_serving("sim:tiny?selectivity=0.4") as server:
        yield server


def _over(proxy: FaultProxy, options: str = "timeout=10") -> str:
    # 10 s a try: an answer of the in-process sim server on a loaded 2-core machine can take
    # seconds, and a try that times out is one more fault than the plan injected
    return f"openai:{proxy.base_url}/v1?concurrency=4&{FAST}&{options}"


def test_fail_every_lets_the_resend_of_a_faulted_post_pass() -> None:
    """So a retry test cannot hinge on how concurrent clients' POSTs interleave."""
    plan = fail_every(3, "500")
    bodies = [b"a", b"a", b"b", b"c", b"d", b"d", b"e"]
    got = [plan(Exchange(i, "POST", "/v1/chat/completions", b)) for i, b in enumerate(bodies)]
    assert got == ["500", "pass", "pass", "pass", "500", "pass", "pass"]
    assert plan(Exchange(7, "GET", "/v1/models", b"")) == "pass"


@pytest.mark.integration
@pytest.mark.parametrize("fault", ["reset", "429", "500", "503", "truncate", "malformed"])
@pytest.mark.parametrize("batch", ["off", "on"])
def test_wire_faults_are_retried_to_the_fault_free_answer(
    sim_server: SimServer, fault: str, batch: str
) -> None:
    # the fault-free answer of the same client (openai: calibrates its decisions per template,
    # so it need not agree with the sim: backend in process)
    expected = _run(f"openai:{sim_server.base_url}?concurrency=4&{FAST}", cache="off")
    with FaultProxy(sim_server.base_url, plan=fail_every(3, fault)) as proxy:
        assert _run(_over(proxy, f"timeout=10&batch={batch}"), cache="off") == expected
    batches = proxy.paths.count("/v1/chat/completions/batch")
    if batch == "off":
        assert batches == 0
        assert proxy.counts[fault] >= 10  # every third of the 40 row requests met the fault
    else:  # 40 rows in batches of 8 (and calibration rows one by one): every third POST
        assert batches >= 5
        assert proxy.counts[fault] >= 2


@pytest.mark.integration
def test_a_hanging_server_is_a_timeout_error_within_the_budget(sim_server: SimServer) -> None:
    with FaultProxy(sim_server.base_url, plan=fail_first(10**6, "hang"), hang_s=30) as proxy:
        started = time.monotonic()
        with pytest.raises(BackendTimeoutError) as info:
            _run(_over(proxy, "timeout=0.3&retries=1"), cache="off")
        assert time.monotonic() - started < 10
    assert "no answer in time" in str(info.value) and "sem_filter" in str(info.value)


@pytest.mark.integration
def test_a_server_that_keeps_failing_is_an_error_naming_backend_and_operator(
    sim_server: SimServer,
) -> None:
    with FaultProxy(sim_server.base_url, plan=fail_first(10**6, "503")) as proxy:
        spec = _over(proxy, "retries=2")
        with pytest.raises(BackendError) as info:
            _run(spec, cache="off")
    message = str(info.value)
    assert spec in message and "HTTP 503" in message and "sem_filter" in message
    assert "tried 3 time(s)" in message


@pytest.mark.integration
def test_abort_cuts_off_a_request_in_flight(sim_server: SimServer) -> None:
    """``Backend.abort`` (what the scheduler's cancel calls) ends a request the server holds."""
    with FaultProxy(sim_server.base_url, plan=fail_first(10**6, "hang"), hang_s=30) as proxy:
        backend = create_backend(_over(proxy, "timeout=30&retries=0"))
        request = build_request(OperatorKind.FILTER, "row 1 is good")
        out: list[Completion] = []
        worker = threading.Thread(target=lambda: out.extend(backend.complete([request])))
        worker.start()
        time.sleep(0.5)  # sent, and held by the proxy
        aborted = time.monotonic()
        backend.abort([request])
        worker.join(timeout=10)
        took = time.monotonic() - aborted
        backend.close()
    assert not worker.is_alive() and took < 5, f"abort took {took:.1f} s (the hang is 30 s)"
    assert [c.error for c in out] == ["aborted"]
