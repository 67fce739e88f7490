"""The scheduler sidecar SIGKILLed mid-query, then restarted on the same cache file.

Documented behaviour (docs/reliability.md): the client gets a clear ``SidecarError`` (no
transparent retry), the cache file stays intact (SQLite WAL, one transaction per backend
batch), and the rerun reuses every answer finished before the kill: no row twice, none lost.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

import duckdb_sem
from duckdb_sem.errors import SidecarError

pytestmark = pytest.mark.integration

BACKEND = "test:?yes_if=good&latency_ms=120&max_batch=8"
ROWS = 240
SQL = (
    f"SELECT i, sem_filter('{{0}} is positive', CASE WHEN i % 3 = 0 THEN 'good ' ELSE 'meh ' END "
    f"|| i::VARCHAR) AS ok FROM range({ROWS}) t(i)"
)


@contextmanager
def serve(cache: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUCKDB_SEM_")}
    code = "from duckdb_sem.cli.main import main; main()"
    cmd = [sys.executable, "-c", code, "serve", "--backend", BACKEND, "--policy", "fcfs"]
    cmd += ["--listen", "127.0.0.1:0", "--cache", str(cache)]
    proc = subprocess.Popen(
        cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env
    )
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        url = ""
        while not url and time.monotonic() < deadline:
            line = proc.stderr.readline()
            assert line, f"sidecar exited with {proc.wait()}"
            if "listening on " in line:
                url = line.split("listening on ", 1)[1].split()[0]
        assert url, "the sidecar did not start"
        yield url, proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=20)
        if proc.stderr is not None:
            proc.stderr.close()


def _cached(cache: Path) -> int:
    with sqlite3.connect(cache, timeout=10) as db:
        (n,) = db.execute("SELECT count(*) FROM completions").fetchone()
    return int(n)


def test_sigkill_mid_query_is_a_clear_error_and_the_rerun_reuses_finished_work(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "sidecar.sqlite"
    errors: list[BaseException] = []
    with serve(cache) as (url, proc):
        con = duckdb_sem.connect(backend="test:", cache="off", scheduler=url, batch_size=8)

        def run() -> None:
            try:
                con.sql(SQL).fetchall()
            except BaseException as err:  # noqa: BLE001 - the test inspects it
                errors.append(err)

        worker = threading.Thread(target=run)
        worker.start()
        deadline = time.monotonic() + 30
        while _cached(cache) < 24 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)  # no chance to flush or clean up
        proc.wait(timeout=10)
        worker.join(timeout=30)
    assert not worker.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], SidecarError), errors
    assert "died mid-query" in str(errors[0]) and "duckdb-sem serve" in str(errors[0])

    with sqlite3.connect(cache) as db:  # the file survived the kill
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    done = _cached(cache)
    assert 24 <= done < ROWS

    with serve(cache) as (url, _):
        con = duckdb_sem.connect(backend="test:", cache="off", scheduler=url, batch_size=8)
        rows = con.sql(SQL).fetchall()
        usage = httpx.get(f"{url}/v1/status").json()["usage"]
    assert sorted(i for i, _ in rows) == list(range(ROWS))  # each row once
    assert all(ok == (i % 3 == 0) for i, ok in rows)  # every answer right
    assert usage["cache_calls"] == done  # finished work reused ...
    assert usage["physical_calls"] == ROWS - done  # ... and only the rest ran
