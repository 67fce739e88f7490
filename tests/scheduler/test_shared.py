"""One scheduler per backend identity, shared by connections, closed with the last one."""

from __future__ import annotations

import gc
import logging
import subprocess
import sys
import time
import weakref
from pathlib import Path

import duckdb
import pytest

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.cache.store import LLMCache
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


def _scheduler(con: duckdb_sem.SemConnection) -> Scheduler:
    scheduler = con.session.engine.client.scheduler  # type: ignore[attr-defined]
    assert isinstance(scheduler, Scheduler)
    return scheduler


def test_one_scheduler_per_backend_identity_whatever_cache_or_policy(tmp_path: Path) -> None:
    first = duckdb_sem.connect(backend="test:", cache=str(tmp_path / "a.sqlite"))
    second = duckdb_sem.connect(backend="test:?latency_ms=0", cache=str(tmp_path / "b.sqlite"))
    third = duckdb_sem.connect(backend="test:", cache="off")
    other = duckdb_sem.connect(backend="test:?yes_if=fine", cache="off")
    try:
        assert _scheduler(first) is _scheduler(second) is _scheduler(third)
        assert _scheduler(other) is not _scheduler(first)  # another identity
        sql = "SELECT sem_filter('{0} is fine', 'x' || i::VARCHAR) FROM range(5) t(i)"
        assert first.sql(sql).fetchall() == second.sql(sql).fetchall()
        # each connection's answers went to its own cache, none to the connection without one
        for name in ("a.sqlite", "b.sqlite"):
            assert len(LLMCache(tmp_path / name)) == 5
    finally:
        for con in (first, second, third, other):
            con.close()


def test_a_spec_that_runs_on_another_specs_backend_says_which_options_do_not_apply(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # same model and answers, other latency and batch size: the connection shares the first
    # spec's scheduler and backend (one model per identity), so its own options do not apply;
    # this once made a test's "slow" backend a fast one and its interrupt land after the end
    first_spec = "test:?yes_if=fine|other-spec-test"
    second_spec = "test:?yes_if=fine|other-spec-test&latency_ms=100&max_batch=8"
    first = duckdb_sem.connect(backend=first_spec, cache="off")
    try:
        with caplog.at_level(logging.WARNING, logger="duckdb_sem.scheduler.shared"):
            second = duckdb_sem.connect(backend=second_spec, cache="off")
            third = duckdb_sem.connect(backend=second_spec, cache="off")
        try:
            assert _scheduler(second) is _scheduler(first)
            backend = _scheduler(second).backends[0]
            assert isinstance(backend, RuleBackend) and backend.latency_ms == 0
            said = [r.getMessage() for r in caplog.records if "do not apply" in r.getMessage()]
            assert len(said) == 1, said  # once per spec, not once per connection
            assert "latency_ms=100 (runs with (default))" in said[0]
            assert "max_batch=8 (runs with (default))" in said[0]
            assert first_spec in said[0]
        finally:
            second.close()
            third.close()
    finally:
        first.close()


def test_specs_that_differ_only_in_price_share_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # a price is each connection's own (EXPLAIN SEMANTIC reads it from the connection's
    # spec), so it is not an option "that does not apply"; latency beside it still is
    first_spec = "test:?yes_if=fine|price-spec-test&price_in=0.15"
    priced = "test:?yes_if=fine|price-spec-test&price_in=2&price_out=8"
    slower = "test:?yes_if=fine|price-spec-test&price_in=2&latency_ms=100"
    first = duckdb_sem.connect(backend=first_spec, cache="off")
    try:
        with caplog.at_level(logging.WARNING, logger="duckdb_sem.scheduler.shared"):
            second = duckdb_sem.connect(backend=priced, cache="off")
            said_priced = [r.getMessage() for r in caplog.records]
            third = duckdb_sem.connect(backend=slower, cache="off")
            # the same options differ, at another price: no second, identical warning
            fourth = duckdb_sem.connect(backend=slower.replace("price_in=2", "price_in=3"),
                                        cache="off")  # fmt: skip
        try:
            assert _scheduler(second) is _scheduler(first) is _scheduler(third)
            assert not [m for m in said_priced if "do not apply" in m], said_priced
            said = [r.getMessage() for r in caplog.records if "do not apply" in r.getMessage()]
            assert len(said) == 1 and "latency_ms=100 (runs with (default))" in said[0], said
            assert "price" not in said[0].split("this connection's")[1].split(" do not")[0]
        finally:
            second.close()
            third.close()
            fourth.close()
    finally:
        first.close()


def test_the_last_connection_closes_the_scheduler_and_its_backend() -> None:
    # an identity of its own: a connection another test left to the garbage collector must
    # not hold a share of this scheduler
    spec = "test:?yes_if=fine|last-connection-test"
    first = duckdb_sem.connect(backend=spec, cache="off")
    second = duckdb_sem.connect(backend=spec, cache="off")
    answer = first.sql("SELECT sem_filter('{0} is fine', 'x')").fetchall()
    scheduler = _scheduler(first)
    closed: list[str] = []
    backend = scheduler.backends[0]
    original = backend.close
    backend.close = lambda: closed.append("backend") or original()  # type: ignore[method-assign]
    first.close()
    first.close()  # idempotent: the share is released once
    assert closed == [] and second.sql("SELECT sem_filter('{0} is fine', 'x')").fetchall()
    second.close()
    assert closed == ["backend"] and scheduler._closed
    third = duckdb_sem.connect(backend=spec, cache="off")
    assert _scheduler(third) is not scheduler  # a fresh one
    assert third.sql("SELECT sem_filter('{0} is fine', 'x')").fetchall() == answer
    third.close()


def test_a_connection_left_to_the_garbage_collector_releases_its_share(
    caplog: pytest.LogCaptureFixture,
) -> None:
    spec = "test:?yes_if=fine|collected-test"
    slower = "test:?yes_if=fine|collected-test&latency_ms=5"

    def query_and_forget() -> tuple[Scheduler, weakref.ref[object]]:
        # a function that returns without close() (its frame, whose locals duckdb-sem reads
        # to find DataFrames a query names, goes with it)
        forgotten = duckdb_sem.connect(backend=spec, cache="off")
        assert forgotten.sql("SELECT sem_filter('{0} is fine', 'x')").fetchall() == [(True,)]
        return _scheduler(forgotten), weakref.ref(forgotten.session)

    scheduler, session = query_and_forget()
    gc.collect()
    assert session() is None  # nothing keeps the session: DuckDB's UDFs reach it weakly
    deadline = time.monotonic() + 10
    while not scheduler._closed and time.monotonic() < deadline:
        time.sleep(0.01)  # released on a thread of its own
    assert scheduler._closed
    with caplog.at_level(logging.WARNING, logger="duckdb_sem.scheduler.shared"):
        later = duckdb_sem.connect(backend=slower, cache="off")
    try:
        # the later connection builds its own backend, with its own options, and is told nothing
        assert _scheduler(later) is not scheduler
        backend = _scheduler(later).backends[0]
        assert isinstance(backend, RuleBackend) and backend.latency_ms == 5
        assert not [r for r in caplog.records if "do not apply" in r.getMessage()]
    finally:
        later.close()


def test_install_leaves_its_session_to_the_duckdb_connection() -> None:
    # install(con)'s caller keeps no session: the UDFs DuckDB holds do
    raw = duckdb.connect()
    duckdb_sem.install(raw, backend="test:?yes_if=fine|install-keeps-test", cache="off")
    gc.collect()
    try:
        assert raw.sql("SELECT sem_filter('{0} is fine', 'x')").fetchall() == [(True,)]
    finally:
        raw.close()


def test_a_backend_object_gets_no_leaked_scheduler() -> None:
    backend = RuleBackend()
    first = duckdb_sem.connect(backend=backend, cache="off")
    second = duckdb_sem.connect(backend=backend, cache="off")
    scheduler = _scheduler(first)
    assert _scheduler(second) is scheduler and scheduler.backends == [backend]
    first.close()
    second.close()
    assert scheduler._closed  # its thread pool is gone with the last connection
    assert first.session.engine.client.backend_id == backend.backend_id


def test_close_all_closes_what_is_open() -> None:
    con = duckdb_sem.connect(backend="test:", cache="off")
    scheduler = _scheduler(con)
    shared.close_all()
    assert scheduler._closed
    con.close()  # releasing a share of a scheduler already closed is harmless


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
