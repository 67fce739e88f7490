"""Fixtures: a real ``duckdb-sem pgwire`` process on a free port, a test database file."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
from processes import stop
from psycopg.conninfo import make_conninfo

pytestmark = pytest.mark.integration

PG_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=test"

REVIEWS = [
    (1, "a good movie"),
    (2, "bad film"),
    (3, "good acting, bad plot"),
    (4, "dull"),
]


def pg_available() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=1):
            return True
    except OSError:
        return False


def make_db(path: Path, rows: int = 0) -> Path:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE reviews (id INTEGER, text VARCHAR)")
    con.executemany("INSERT INTO reviews VALUES (?, ?)", REVIEWS)
    if rows:
        con.execute(
            "CREATE TABLE big AS SELECT range::INTEGER AS id, 'row ' || range || "
            "CASE WHEN range % 2 = 0 THEN ' good' ELSE ' bad' END AS text FROM range(?)",
            [rows],
        )
    con.close()
    return path


def finished_calls(cache: Path) -> int:
    """LLM calls a server given ``--cache cache`` has finished (its cache holds one row each)."""
    try:
        with contextlib.closing(sqlite3.connect(cache)) as calls:
            return int(calls.execute("SELECT count(*) FROM completions").fetchone()[0])
    except sqlite3.OperationalError:  # not created yet
        return 0


def until_calls(cache: Path, *, running: Callable[[], bool], within_s: float = 120) -> int:
    """Wait until the server has finished an LLM call (a statement of ours is running), while
    ``running()``; a loaded machine can take seconds to start a client and its query."""
    deadline = time.monotonic() + within_s
    while (n := finished_calls(cache)) == 0 and running() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert n > 0, f"no LLM call within {within_s:g} s"
    return n


def settled_calls(cache: Path, *, quiet_s: float, within_s: float) -> int:
    """The call count once it has not moved for ``quiet_s`` (or after ``within_s`` at most)."""
    deadline = time.monotonic() + within_s
    count = finished_calls(cache)
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = finished_calls(cache)
        if now == count:
            break
        count = now
    return count


@dataclass(frozen=True, slots=True)
class WireProcess:
    port: int
    dbname: str
    process: subprocess.Popen[bytes]

    def dsn(self, **extra: str) -> str:
        parts = {
            "host": "127.0.0.1",
            "port": str(self.port),
            "user": "tester",
            "dbname": self.dbname,
        }
        parts.update(extra)
        return str(make_conninfo(**parts))


@contextmanager
def wire_server(db: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[WireProcess]:
    """Port 0: the server binds a free port and reports it (no pick-a-port-then-bind race)."""
    command: Sequence[str] = [
        sys.executable, "-c", "from duckdb_sem.cli.main import main; main()", "pgwire",
        "--db", str(db), "--listen", "127.0.0.1:0", "--cache", "off", *args,
    ]  # fmt: skip
    full_env = {**os.environ, **(env or {})}
    process = subprocess.Popen(
        command,
        env=full_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stderr is not None
        port = 0
        while not port:  # "duckdb-sem pgwire: listening on 127.0.0.1:PORT (database ...)"
            line = process.stderr.readline().decode(errors="replace")
            if not line:
                raise RuntimeError(f"pgwire exited with {process.wait()} before listening")
            found = re.search(r"listening on [^ ]*:(\d+) ", line)
            port = int(found.group(1)) if found else 0
        yield WireProcess(port, db.stem, process)
    finally:
        stop(process)


@pytest.fixture
def db_file(tmp_path: Path) -> Path:
    return make_db(tmp_path / "sem.duckdb")


@pytest.fixture
def server(db_file: Path) -> Iterator[WireProcess]:
    with wire_server(db_file, "--backend", "test:?yes_if=good") as proc:
        yield proc


@pytest.fixture
def needs_pg() -> None:
    if not pg_available():
        pytest.skip("no PostgreSQL on 127.0.0.1:5432 (.ci/run starts one)")
