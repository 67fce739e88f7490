"""A sidecar that stops answering (SIGSTOP) fails waiting queries within the documented
liveness time, and ``interrupt()`` returns at once instead of waiting on it."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from sidecar_helpers import sidecar

import duckdb_sem
from duckdb_sem.errors import SidecarError
from duckdb_sem.scheduler.sidecar_client import LIVENESS_S

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
