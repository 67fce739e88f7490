"""A portal that ends before its last row stops its LLM work (issue 44, item 5).

A BI tool that pages through JDBC/ODBC sends Execute with a row limit, reads a page, then
Close + Sync. The rest of the portal's rows are never asked for, so their LLM calls must not
be made: neither when the portal ends (Close, a Sync that ends it, a Bind that replaces it,
the client going away) nor when the next statement needs the connection. LLM calls are
counted as the rows of the server's cache file (one per answer); 64 rows per SEU.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from socket import socket

import pytest
from conftest import WireProcess, finished_calls, make_db, settled_calls, wire_server
from wire_raw import error_fields, read_message, startup, until_ready

pytestmark = pytest.mark.integration

SEU_ROWS = 64
#: 2,000 rows: 32 SEUs of 100 ms, so running the rest takes seconds; each test asks its own
#: question, so none finds another's answers in the cache
QUERY = "SELECT id, text FROM big WHERE sem_filter('{{text}} is positive ({})')"


def _msg(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def _parse_bind(sql: str, portal: str) -> bytes:
    parse = _msg(b"P", b"\0" + sql.encode() + b"\0" + struct.pack("!h", 0))
    return parse + _msg(b"B", portal.encode() + b"\0\0" + struct.pack("!hhh", 0, 0, 0))


def _execute(portal: str, limit: int) -> bytes:
    return _msg(b"E", portal.encode() + b"\0" + struct.pack("!i", limit))


def _close_portal(portal: str) -> bytes:
    return _msg(b"C", b"P" + portal.encode() + b"\0")


SYNC = _msg(b"S")


def _kinds(messages: list[tuple[bytes, bytes]]) -> list[bytes]:
    for kind, payload in messages:
        assert kind != b"E", error_fields(payload)
    return [kind for kind, _ in messages]


@pytest.fixture(scope="module")
def paging(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[WireProcess, Path]]:
    tmp = tmp_path_factory.mktemp("portal_close")
    db = make_db(tmp / "sem.duckdb", rows=2000)
    cache = tmp / "calls.sqlite"
    args = ("--backend", "test:?yes_if=good&latency_ms=100", "--cache", str(cache))
    with wire_server(db, *args, env={"DUCKDB_SEM_BATCH_SIZE": str(SEU_ROWS)}) as server:
        yield server, cache


def _first_page(server: WireProcess, portal: str, question: str) -> socket:
    """A session that has read the first 5 rows of ``QUERY`` from a suspended ``portal``."""
    sock = startup(server.port, database=server.dbname)
    until_ready(sock)
    sock.sendall(_parse_bind(QUERY.format(question), portal) + _execute(portal, 5) + _msg(b"H"))
    page = [read_message(sock) for _ in range(2 + 5 + 1)]  # 1, 2, five DataRows, suspended
    assert _kinds(page) == [b"1", b"2", *[b"D"] * 5, b"s"]
    return sock


def _select_1(sock: socket) -> float:
    started = time.monotonic()
    sock.sendall(_msg(b"Q", b"SELECT 1\0"))
    assert _kinds(until_ready(sock)) == [b"T", b"D", b"C", b"Z"]
    return time.monotonic() - started


def _close_sync(sock: socket) -> None:
    sock.sendall(_close_portal("") + SYNC)
    assert _kinds(until_ready(sock)) == [b"3", b"Z"]


def _sync(sock: socket) -> None:  # outside a transaction block, Sync ends the portal
    sock.sendall(SYNC)
    assert _kinds(until_ready(sock)) == [b"Z"]


def _named_close_sync(sock: socket) -> None:
    sock.sendall(_close_portal("page") + SYNC)
    assert _kinds(until_ready(sock)) == [b"3", b"Z"]


def _bound_again(sock: socket) -> None:  # the unnamed portal bound to another statement
    sock.sendall(_parse_bind("SELECT 2", "") + _execute("", 0) + SYNC)
    assert _kinds(until_ready(sock)) == [b"1", b"2", b"D", b"C", b"Z"]


ENDINGS: dict[str, tuple[str, Callable[[socket], None]]] = {
    "close+sync": ("", _close_sync),
    "sync": ("", _sync),
    "named close+sync": ("page", _named_close_sync),
    "bind again": ("", _bound_again),
}


@pytest.mark.parametrize("ending", list(ENDINGS))
def test_a_closed_portal_stops_its_llm_work(paging: tuple[WireProcess, Path], ending: str) -> None:
    server, cache = paging
    portal, end = ENDINGS[ending]
    before = settled_calls(cache, quiet_s=0.5, within_s=30)
    sock = _first_page(server, portal, ending)
    try:
        at_page = finished_calls(cache)
        end(sock)
        # the next statement's latency is its own: before, it read the portal's rest first
        # (2,000 rows' LLM calls, 32 SEUs of 100 ms: over 3 s)
        latency = _select_1(sock)
        assert latency < 1.0, f"SELECT 1 after the portal ended took {latency:.1f} s"
        after = settled_calls(cache, quiet_s=0.5, within_s=30)
    finally:
        sock.close()
    # the SEU in flight and one the runtime sent ahead may finish; nothing more
    assert after - at_page <= 2 * SEU_ROWS, f"{after - at_page} LLM calls after the portal ended"
    assert after - before < 2000, "the portal's query ran to its end"


def test_a_client_gone_with_a_suspended_portal_stops_its_llm_work(
    paging: tuple[WireProcess, Path],
) -> None:
    server, cache = paging
    settled_calls(cache, quiet_s=0.5, within_s=30)
    sock = _first_page(server, "", "gone")
    at_page = finished_calls(cache)
    sock.close()
    after = settled_calls(cache, quiet_s=0.5, within_s=30)
    assert after - at_page <= 2 * SEU_ROWS, f"{after - at_page} LLM calls after the client left"
