"""Shared schedulers live as long as the process, and are closed, with their backends, at exit."""

from __future__ import annotations

import subprocess
import sys

import duckdb_sem
from duckdb_sem.scheduler import shared
from duckdb_sem.scheduler.core import Scheduler

EXIT_SCRIPT = """
import duckdb_sem
from duckdb_sem.backends.sim.backend import create
from duckdb_sem.backends.sim.server import SimServer

server = SimServer(create("sim:tiny")).start()
con = duckdb_sem.connect(backend=f"openai:{server.base_url}?concurrency=4", cache="off")
print(con.sql("SELECT sem_filter('{0} is fine', 'x') AS ok").fetchall())
con.close()
server.close()
"""


def test_connections_share_one_scheduler_until_close_all() -> None:
    first = duckdb_sem.connect(backend="test:", cache="off")
    second = duckdb_sem.connect(backend="test:", cache="off")
    answer = first.sql("SELECT sem_filter('{0} is fine', 'x')").fetchall()
    client = first.session.engine.client
    assert isinstance(client, Scheduler) and second.session.engine.client is client
    closed: list[str] = []
    backend = client.backends[0]
    original = backend.close
    backend.close = lambda: closed.append("backend") or original()  # type: ignore[method-assign]
    first.close()
    second.close()
    shared.close_all()
    assert closed == ["backend"]
    third = duckdb_sem.connect(backend="test:", cache="off")
    assert third.session.engine.client is not client  # a fresh one after close_all
    assert third.sql("SELECT sem_filter('{0} is fine', 'x')").fetchall() == answer
    third.close()


def test_a_process_exits_without_leaving_backend_connections_open() -> None:
    proc = subprocess.run(
        [sys.executable, "-W", "always::ResourceWarning", "-c", EXIT_SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() in ("[(True,)]", "[(False,)]")
    assert "unclosed" not in proc.stderr, proc.stderr
