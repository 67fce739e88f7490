"""A sidecar that stops answering (SIGSTOP) fails waiting queries within the documented
liveness time, and ``interrupt()`` returns at once instead of waiting on it; one that answers
SEUs but not health checks (overloaded) is not taken for dead."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest
from sidecar_helpers import sidecar

import duckdb_sem
from duckdb_sem.backends.registry import create_backend
from duckdb_sem.errors import SidecarError
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.scheduler import sidecar_server
from duckdb_sem.scheduler.core import Scheduler
from duckdb_sem.scheduler.seu import SEU
from duckdb_sem.scheduler.sidecar_client import LIVENESS_S, SidecarClient
from duckdb_sem.scheduler.sidecar_server import SidecarServer

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="needs SIGSTOP"),
]

SQL = "SELECT count(*) FROM range(4000) t(i) WHERE sem_filter('{0} ok', 'row ' || i::VARCHAR)"


def test_a_stopped_sidecar_is_a_clear_error_and_interrupt_returns_at_once() -> None:
    with sidecar("--backend", "test:?latency_ms=200&max_batch=16") as (url, proc):
        running = duckdb_sem.connect(cache="off", scheduler=url, batch_size=16)
        other = duckdb_sem.connect(cache="off", scheduler=url, batch_size=16)
        outcome: dict[str, BaseException | None] = {}

        def run(name: str, con: duckdb_sem.SemConnection) -> None:
            try:
                con.sql(SQL).fetchall()
                outcome[name] = None
            except BaseException as err:  # noqa: BLE001 - inspected below
                outcome[name] = err

        threads = {n: threading.Thread(target=run, args=(n, c)) for n, c in
                   (("running", running), ("other", other))}  # fmt: skip
        for t in threads.values():
            t.start()
        time.sleep(1.0)  # both queries are waiting on SEUs in the sidecar
        os.kill(proc.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            other.interrupt()
            assert time.monotonic() - stopped < 1.0, "interrupt() waited on the stopped sidecar"
            threads["running"].join(timeout=LIVENESS_S + 10)
            elapsed = time.monotonic() - stopped
            assert not threads["running"].is_alive(), "the query hung on the stopped sidecar"
            # liveness_s without a health reply, plus one probe period and SEU bookkeeping
            assert elapsed < LIVENESS_S + 5, f"took {elapsed:.1f} s"
            error = outcome["running"]
            assert error is not None and "stopped answering" in str(error), error
            assert isinstance(error, SidecarError) or "SidecarError" in repr(error)
            threads["other"].join(timeout=LIVENESS_S + 10)
            assert not threads["other"].is_alive()
        finally:
            os.kill(proc.pid, signal.SIGCONT)
            running.close()
            other.close()


def test_a_sidecar_that_answers_seus_but_not_health_checks_is_alive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Overloaded, a sidecar's health replies queue behind its SEUs on its event loop; while it
    still answers SEUs, the SEUs waiting on it are its work, not lost to the watchdog."""
    scheduler = Scheduler([create_backend("test:?yes_if=fine&latency_ms=400&max_batch=4")])
    server = SidecarServer(scheduler, "127.0.0.1:0").start()
    silent = threading.Event()
    answer = sidecar_server._Front._get

    def late(front: Any, conn: Any, request: Any) -> None:
        if request.path == "/v1/health" and silent.is_set():
            return  # never answered: the client's probe times out
        answer(front, conn, request)

    monkeypatch.setattr(sidecar_server._Front, "_get", late)
    client = SidecarClient(server.url, liveness_s=1.0)
    try:
        silent.set()
        futures = [
            client.submit(SEU(f"q{i}", "sem_filter",
                              tuple(build_request(OperatorKind.FILTER, f"row {i}-{j} is fine")
                                    for j in range(4)), 1.0))
            for i in range(20)
        ]  # fmt: skip
        started = time.monotonic()
        results = [f.result(timeout=30) for f in futures]  # 5 rounds of 0.4 s: > liveness_s
        assert time.monotonic() - started > 1.5, "too quick to have tested the watchdog"
        assert all(c.value is True for r in results for c in r.completions)
    finally:
        client.close()
        server.shutdown()
        scheduler.close()
