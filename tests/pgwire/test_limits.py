"""Limits, timeouts and failures a client or operator can cause, against a real server process.

Figures asserted here are the documented ones (docs/pgwire.md), with generous bounds.
"""

from __future__ import annotations

import struct
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from conftest import (
    WireProcess,
    finished_calls,
    make_db,
    settled_calls,
    until_calls,
    wire_server,
)
from wire_raw import error_fields, read_message, startup, until_ready

pytestmark = pytest.mark.integration


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.fixture
def users(tmp_path: Path) -> Path:
    path = tmp_path / "users"
    path.write_text("alice:pw\n")
    return path


def test_oversized_message_before_auth_is_refused_unread(db_file: Path, users: Path) -> None:
    with wire_server(db_file, "--backend", "test:", "--users", str(users)) as server:
        pid = server.process.pid
        before = _rss_mb(pid)
        socks = []
        for _ in range(4):
            sock = startup(server.port, user="alice")
            assert read_message(sock)[0] == b"R"  # AuthenticationSASL
            # A SASLInitialResponse announcing 200 MB, and the start of it.
            sock.sendall(b"p" + struct.pack("!i", 200 * 1024 * 1024) + b"x" * 1000)
            socks.append(sock)
        for sock in socks:
            kind, payload = read_message(sock)
            assert kind == b"E" and error_fields(payload)["C"] == "08P01"
            assert "limit of 65535 bytes" in error_fields(payload)["M"]
            sock.close()
        assert _rss_mb(pid) - before < 50
        with psycopg.connect(server.dsn(user="alice", password="pw")) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)


def test_oversized_message_after_auth_is_refused(db_file: Path) -> None:
    with wire_server(db_file, "--backend", "test:", "--max-message", "1") as server:
        sock = startup(server.port)
        until_ready(sock)
        sock.sendall(b"Q" + struct.pack("!i", 2 * 1024 * 1024) + b"SELECT 1")
        kind, payload = read_message(sock)
        assert kind == b"E" and error_fields(payload)["C"] == "08P01"
        assert error_fields(payload)["S"] == "FATAL"
        assert read_message(sock) == (b"", b"")  # closed
        sock.close()


def test_unauthenticated_connection_times_out(db_file: Path, users: Path) -> None:
    args = ("--backend", "test:", "--users", str(users), "--auth-timeout", "1")
    with wire_server(db_file, *args) as server:
        sock = startup(server.port, user="alice")
        assert read_message(sock)[0] == b"R"
        started = time.monotonic()
        assert read_message(sock) == (b"", b"")  # never answered: closed by the server
        assert time.monotonic() - started < 5
        sock.close()


def test_connection_cap(db_file: Path) -> None:
    with (
        wire_server(db_file, "--backend", "test:", "--max-connections", "2") as server,
        psycopg.connect(server.dsn()) as a,
    ):
        with psycopg.connect(server.dsn()) as b:
            with pytest.raises(psycopg.OperationalError, match="too many clients"):
                psycopg.connect(server.dsn())
            assert b.execute("SELECT 2").fetchone() == (2,)
        deadline = time.monotonic() + 5
        while True:  # the server notices b's close a moment later
            try:
                with psycopg.connect(server.dsn()) as c:
                    assert c.execute("SELECT 3").fetchone() == (3,)
                break
            except psycopg.OperationalError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert a.execute("SELECT 1").fetchone() == (1,)


def test_unknown_message_gets_a_flushed_fatal_error(server: WireProcess) -> None:
    sock = startup(server.port)
    until_ready(sock)
    sock.sendall(b"Y" + struct.pack("!i", 4))
    kind, payload = read_message(sock)
    fields = error_fields(payload)
    assert kind == b"E" and fields["C"] == "08P01" and fields["S"] == "FATAL"
    assert "invalid frontend message type" in fields["M"]
    assert read_message(sock) == (b"", b"")
    sock.close()


def test_killed_client_has_its_llm_work_dropped(tmp_path: Path) -> None:
    db = make_db(tmp_path / "slow.duckdb", rows=2000)
    cache = tmp_path / "calls.sqlite"
    # 64 rows per SEU, one SEU at a time, 300 ms per SEU: the whole query takes ~10 s of calls.
    env = {"DUCKDB_SEM_BATCH_SIZE": "64"}
    args = ("--backend", "test:?yes_if=good&latency_ms=300", "--cache", str(cache))
    with wire_server(db, *args, env=env) as server:
        client = subprocess.Popen(
            [sys.executable, "-c",
             "import psycopg, sys; c = psycopg.connect(sys.argv[1]); "
             "c.execute(\"SELECT count(*) FROM big WHERE sem_filter('{text} is positive')\")",
             server.dsn()],
        )  # fmt: skip
        try:
            # killed while its query runs: once its first SEU's calls are in, not after a
            # fixed 1.5 s (a loaded machine may not have started the client and query by then)
            until_calls(cache, running=lambda: client.poll() is None)
        finally:
            client.kill()
            client.wait()
        at_kill = finished_calls(cache)
        # Counted in calls, not seconds: what may finish after the kill is the SEU in flight
        # and one more the runtime sent before the hangup was seen; without the cancel the
        # count keeps moving (an SEU per 300 ms) until all 2000 rows are asked.
        total = settled_calls(cache, quiet_s=1.0, within_s=30.0)
        assert total < 2000, "the killed client's query ran to its end"
        assert total - at_kill <= 2 * 64, f"{total - at_kill} LLM calls after the kill"
        with psycopg.connect(server.dsn()) as conn:
            assert conn.execute("SELECT count(*) FROM reviews").fetchone() == (4,)


def _serve(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from duckdb_sem.cli.main import main; main()", "pgwire",
         "--db", str(db), "--backend", "test:", "--cache", "off", *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_busy_port_and_locked_file_are_one_line_errors(server: WireProcess, tmp_path: Path) -> None:
    other = make_db(tmp_path / "other.duckdb")
    busy = _serve(other, "--listen", f"127.0.0.1:{server.port}")
    assert busy.returncode == 1
    lines = [line for line in busy.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "already in use" in lines[0] and "--listen" in lines[0], lines
    db = Path(server.process.args[server.process.args.index("--db") + 1])  # type: ignore[union-attr, index]
    locked = _serve(db, "--listen", "127.0.0.1:0")
    assert locked.returncode == 1
    lines = [line for line in locked.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "is locked by another process" in lines[0], lines
