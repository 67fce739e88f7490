"""The sidecar for real: a ``duckdb-sem serve`` process, client processes, HTTP on 127.0.0.1."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families
from sidecar_helpers import client_results, sidecar, start_client

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.cli.top import top
from duckdb_sem.errors import QueryCancelledError, SidecarError
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import Completion, LLMRequest, OperatorKind
from duckdb_sem.scheduler.core import Scheduler
from duckdb_sem.scheduler.seu import SEU
from duckdb_sem.scheduler.sidecar_client import SidecarClient
from duckdb_sem.scheduler.sidecar_server import SidecarServer

pytestmark = pytest.mark.integration

WORDS = ["good", "bad", "plot", "actor", "scene", "fine", "dull", "great"]


def _rows(rnd: random.Random, pool: list[str], n: int) -> list[str]:
    return rnd.sample(pool, n)


def test_processes_and_connections_share_one_sidecar_nothing_lost_or_duplicated(
    tmp_path: Path,
) -> None:
    rnd = random.Random(7)
    pool = [f"review {i}: {' '.join(rnd.choices(WORDS, k=4))}" for i in range(120)]
    backend = "test:?yes_if=good&latency_ms=5&max_batch=16"
    with sidecar("--backend", backend, "--policy", "srtf", cache=tmp_path / "c.sqlite") as (url, _):
        plans = [[_rows(rnd, pool, rnd.randint(20, 80)) for _ in range(3)] for _ in range(3)]
        procs = [start_client(url, backend, plan, "{0} is positive") for plan in plans]
        outputs = [client_results(p) for p in procs]
        status = httpx.get(f"{url}/v1/status").json()
    asked: list[str] = []
    for plan, out in zip(plans, outputs, strict=True):
        assert out["errors"] == []
        results = out["results"]
        assert isinstance(results, dict)
        for k, rows in enumerate(plan):
            got = {text: ok for text, ok in results[str(k)]}
            assert sorted(got) == sorted(rows)  # none lost, none duplicated
            assert all(got[t] == ("good" in t) for t in rows)  # all correct
            asked += rows
    usage = status["usage"]
    assert usage["virtual_calls"] == len(asked)
    assert usage["physical_calls"] == len(set(asked))  # every unique request ran exactly once
    assert usage["physical_calls"] + usage["fused_calls"] + usage["cache_calls"] == len(asked)


def test_the_environment_variable_routes_connections_to_the_sidecar(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scheduler = Scheduler([RuleBackend(yes_if=["good"])])
    server = SidecarServer(scheduler, "127.0.0.1:0").start()
    try:
        monkeypatch.setenv("DUCKDB_SEM_SCHEDULER", server.url)
        con = duckdb_sem.connect(backend="test:?yes_if=good", cache="off")
        assert con.sql("SELECT sem_filter('{0}', 'good one')").fetchall() == [(True,)]
        assert scheduler.usage.physical_calls == 1
    finally:
        server.shutdown()


def test_unix_socket_listener(tmp_path: Path) -> None:
    scheduler = Scheduler([RuleBackend(yes_if=["good"])])
    server = SidecarServer(scheduler, f"unix:{tmp_path / 'sem.sock'}").start()
    try:
        with duckdb_sem.connect(backend="test:", cache="off", scheduler=server.url) as con:
            assert con.sql("SELECT sem_filter('{0}', 'so good')").fetchall() == [(True,)]
    finally:
        server.shutdown()


def test_unreachable_sidecar_is_a_sidecar_error_that_says_what_to_do() -> None:
    with pytest.raises(SidecarError, match="duckdb-sem serve"):
        SidecarClient("http://127.0.0.1:9", connect_timeout=1.0)


def test_sidecar_dying_mid_query_is_a_sidecar_error() -> None:
    with sidecar("--backend", "test:?latency_ms=3000") as (url, proc):
        con = duckdb_sem.connect(backend="test:", cache="off", scheduler=url)
        errors: list[BaseException] = []

        def run() -> None:
            try:
                con.sql("SELECT sem_filter('{0}', 'x')").fetchall()
            except BaseException as err:  # noqa: BLE001 - the test inspects it
                errors.append(err)

        thread = threading.Thread(target=run)
        thread.start()
        time.sleep(0.8)
        proc.kill()
        thread.join(timeout=30)
    assert len(errors) == 1 and isinstance(errors[0], SidecarError), errors


class _Gated(RuleBackend):
    """Answers once the test opens :attr:`gate`: work runs exactly as long as the test needs
    (a 300 ms latency let a loaded machine finish the victim before its cancel arrived)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        assert self.gate.wait(timeout=60), "the test never opened the gate"
        return super().complete(requests)


def test_cancel_is_a_message_that_fails_the_waiting_seu() -> None:
    backend = _Gated()
    scheduler = Scheduler([backend], policy="fcfs")
    server = SidecarServer(scheduler, "127.0.0.1:0").start()
    client = SidecarClient(server.url)
    try:
        requests = tuple(build_request(OperatorKind.FILTER, f"r{i}") for i in range(3))
        # four blockers hold the backend's four batch slots until the gate opens
        blockers = [client.submit(SEU(f"b{i}", "f", requests[:1], 1.0)) for i in range(4)]
        victim = client.submit(SEU("victim", "f", requests[1:], 1.0))
        client.cancel("victim")
        with pytest.raises(QueryCancelledError):
            victim.result(timeout=30)
        backend.gate.set()
        assert all(len(b.result(timeout=30).completions) == 1 for b in blockers)
    finally:
        backend.gate.set()
        client.close()
        server.shutdown()


def test_status_metrics_and_top_show_live_queries() -> None:
    scheduler = Scheduler([RuleBackend(latency_ms=400)], policy="srtf")
    server = SidecarServer(scheduler, "127.0.0.1:0").start()
    client = SidecarClient(server.url)
    try:
        requests = tuple(build_request(OperatorKind.FILTER, f"row {i}") for i in range(8))
        futures = [
            client.submit(
                SEU(f"query-{i}", "sem_filter#1", requests[i : i + 1], 100.0 * i, "conn-a")
            )
            for i in range(8)
        ]
        time.sleep(0.2)
        metrics = httpx.get(f"{server.url}/metrics").text
        # the whole exposition parses as Prometheus text
        samples = {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(metrics)
            for sample in family.samples
        }
        key = (("connection", "conn-a"), ("query_id", "query-7"))
        assert samples[("duckdb_sem_query_remaining_cost", key)] == 700.0
        for name in ("queue_length", "in_flight_requests", "tokens_per_second"):
            assert f"# TYPE duckdb_sem_{name} gauge" in metrics
        result = CliRunner().invoke(top, ["--url", server.url, "--once"], env={"COLUMNS": "250"})
        assert result.exit_code == 0, result.output
        assert "query-7" in result.output and "srtf" in result.output
        for f in futures:
            f.result(timeout=30)
        after = {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(httpx.get(f"{server.url}/metrics").text)
            for sample in family.samples
        }
        # all eight requests answered: each counted once as virtual (as if nothing were shared)
        assert after[("duckdb_sem_calls_total", (("kind", "virtual"),))] == 8
    finally:
        client.close()
        server.shutdown()


def test_latency_reports_the_time_each_seu_spent_inside_the_sidecar() -> None:
    # RuleBackend answers after 150 ms: an SEU's time inside the sidecar includes its backend
    scheduler = Scheduler([RuleBackend(latency_ms=150)])
    server = SidecarServer(scheduler, "127.0.0.1:0").start()
    client = SidecarClient(server.url)
    try:
        before = time.monotonic()
        requests = tuple(build_request(OperatorKind.FILTER, f"row {i}") for i in range(2))
        for i in range(2):
            client.submit(SEU(f"q{i}", "sem_filter#1", requests[i : i + 1], 1.0)).result(30)
        # the sidecar records an SEU once its answer is written, so the client can hold the
        # answer a moment before the record exists: wait for both records, then read the clock
        deadline = time.monotonic() + 10
        while True:
            window = httpx.get(f"{server.url}/v1/latency", params={"since": before}).json()
            if window["count"] >= 2 or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        after = time.monotonic()
        assert window["count"] == 2
        assert 150 <= window["p50_ms"] <= window["p99_ms"] < 1000 * (after - before)
        later = httpx.get(f"{server.url}/v1/latency", params={"since": after}).json()
        assert later == {"count": 0, "p50_ms": 0.0, "p99_ms": 0.0}
        bad = httpx.get(f"{server.url}/v1/latency", params={"since": "yesterday"})
        assert bad.status_code == 400 and "monotonic" in bad.text
    finally:
        client.close()
        server.shutdown()
