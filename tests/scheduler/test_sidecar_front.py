"""The sidecar's event-loop HTTP front, byte for byte: raw sockets against an in-process server.

What a real client (httpx, ``SidecarClient``) never does but a broken or hostile one might:
pipelined requests, malformed or oversized requests, ``Connection: close``, unknown methods,
hanging up while its SEU waits, and a server shut down under open connections. Each test
waits on the server's answers or on a gate, never on a sleep.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator, Sequence

import pytest

from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import Completion, LLMRequest, OperatorKind
from duckdb_sem.scheduler import sidecar_server
from duckdb_sem.scheduler.core import Scheduler
from duckdb_sem.scheduler.protocol import decode_result, encode_seu
from duckdb_sem.scheduler.seu import SEU
from duckdb_sem.scheduler.sidecar_client import SidecarClient
from duckdb_sem.scheduler.sidecar_server import SidecarServer


class _Gated(RuleBackend):
    """Answers once the test opens ``gate``; ``entered`` is set when a batch starts."""

    def __init__(self) -> None:
        super().__init__(yes_if=["good"])
        self.gate = threading.Event()
        self.entered = threading.Event()

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        self.entered.set()
        assert self.gate.wait(timeout=60), "the test never opened the gate"
        return super().complete(requests)


class _Recording(Scheduler):
    """A scheduler that notes the queries it was asked to cancel."""

    def __init__(self, backend: RuleBackend) -> None:
        super().__init__([backend], policy="fcfs")
        self.cancelled: list[str] = []
        self.cancel_seen = threading.Event()

    def cancel(self, query_id: str) -> None:
        self.cancelled.append(query_id)
        super().cancel(query_id)
        self.cancel_seen.set()


@pytest.fixture
def gated() -> Iterator[tuple[SidecarServer, _Recording, _Gated]]:
    backend = _Gated()
    scheduler = _Recording(backend)
    server = SidecarServer(scheduler, "127.0.0.1:0").start()
    try:
        yield server, scheduler, backend
    finally:
        backend.gate.set()
        server.shutdown()
        scheduler.close()


def _connect(server: SidecarServer) -> socket.socket:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=30)
    return sock


def _seu_bytes(query_id: str, *texts: str) -> bytes:
    requests = tuple(build_request(OperatorKind.FILTER, text) for text in texts)
    body = encode_seu(SEU(query_id, "sem_filter#1", requests, 1.0))
    return (
        f"POST /v1/seu HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def _read_answers(sock: socket.socket, count: int) -> list[tuple[int, dict[str, str], bytes]]:
    """Read ``count`` HTTP answers: (status, headers, body) each."""
    buffer = b""
    answers = []
    while len(answers) < count:
        while b"\r\n\r\n" not in buffer:
            chunk = sock.recv(65536)
            assert chunk, f"connection closed after {len(answers)} answers"
            buffer += chunk
        head, _, buffer = buffer.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
        length = int(headers["content-length"])
        while len(buffer) < length:
            chunk = sock.recv(65536)
            assert chunk, "connection closed inside a body"
            buffer += chunk
        body, buffer = buffer[:length], buffer[length:]
        answers.append((int(status_line.split()[1]), headers, body))
    return answers


def _closed(sock: socket.socket) -> bool:
    """True once the server has closed the connection (reads to the end)."""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return True
        if not chunk:
            return True


def test_pipelined_requests_are_answered_in_order(
    gated: tuple[SidecarServer, _Recording, _Gated],
) -> None:
    server, _, backend = gated
    backend.gate.set()
    with _connect(server) as sock:
        health = b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"
        sock.sendall(_seu_bytes("q1", "good film") + health + _seu_bytes("q2", "dull") + health)
        answers = _read_answers(sock, 4)
    statuses = [status for status, _, _ in answers]
    assert statuses == [200, 200, 200, 200]
    first, second = decode_result(answers[0][2]), decode_result(answers[2][2])
    assert [c.value for c in first.completions] == [True]
    assert [c.value for c in second.completions] == [False]
    assert json.loads(answers[1][2])["ok"] is True


def test_a_deep_pipeline_is_read_in_steps_and_answered_whole(
    gated: tuple[SidecarServer, _Recording, _Gated],
) -> None:
    # far more requests than the server reads ahead (_MAX_PIPELINED): it stops reading the
    # connection while they wait and reads on as it answers, so all are answered, in order
    server, _, backend = gated
    backend.gate.set()
    count = 10 * sidecar_server._MAX_PIPELINED
    with _connect(server) as sock:
        sock.sendall(b"".join(
            f"GET /nowhere-{k} HTTP/1.1\r\nHost: x\r\n\r\n".encode() for k in range(count)
        ))  # fmt: skip
        answers = _read_answers(sock, count)
    assert [status for status, _, _ in answers] == [404] * count
    messages = [json.loads(body)["error"]["message"] for _, _, body in answers]
    assert messages == [f"no such path /nowhere-{k}" for k in range(count)]


def test_health_is_answered_while_every_backend_slot_waits(
    gated: tuple[SidecarServer, _Recording, _Gated],
) -> None:
    server, _, backend = gated
    with _connect(server) as waiting, _connect(server) as other:
        waiting.sendall(_seu_bytes("q1", "good film"))
        assert backend.entered.wait(30)
        other.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        [(status, _, body)] = _read_answers(other, 1)
        assert status == 200 and json.loads(body)["pid"] > 0
        backend.gate.set()
        [(status, _, body)] = _read_answers(waiting, 1)
    assert status == 200 and decode_result(body).completions[0].value is True


def test_a_client_that_hangs_up_while_its_seu_waits_has_its_query_cancelled(
    gated: tuple[SidecarServer, _Recording, _Gated],
) -> None:
    server, scheduler, backend = gated
    sock = _connect(server)
    sock.sendall(_seu_bytes("leaver", "good film", "good plot"))
    assert backend.entered.wait(30)
    sock.close()
    assert scheduler.cancel_seen.wait(30), "the hang-up was not noticed"
    assert scheduler.cancelled == ["leaver"]
    backend.gate.set()
    # the server goes on serving others, and is idle again once the dropped SEU ended
    client = SidecarClient(server.url)
    try:
        request = build_request(OperatorKind.FILTER, "good again")
        assert client.submit(SEU("next", "f", (request,), 1.0)).result(30).completions[0].value
    finally:
        client.close()


def test_connection_close_is_honoured(gated: tuple[SidecarServer, _Recording, _Gated]) -> None:
    server, _, _ = gated
    with _connect(server) as sock:
        sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        [(status, headers, _)] = _read_answers(sock, 1)
        assert status == 200 and headers["connection"] == "close"
        assert _closed(sock)


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"NOT HTTP AT ALL\r\n\r\n", 400),
        (b"PUT /v1/seu HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 501),
        (b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n", 404),
        (b"POST /v1/seu HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n{bad}", 400),
        (b"POST /v1/cancel HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", 400),
        (b"GET /v1/latency?since=soon HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    ],
)
def test_bad_requests_get_a_clear_error_and_the_server_goes_on(
    gated: tuple[SidecarServer, _Recording, _Gated], request_bytes: bytes, status: int
) -> None:
    server, _, _ = gated
    with _connect(server) as sock:
        sock.sendall(request_bytes)
        [(got, _, body)] = _read_answers(sock, 1)
    assert got == status
    assert json.loads(body)["error"]["message"]
    with _connect(server) as sock:  # and the next client is served
        sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _read_answers(sock, 1)[0][0] == 200


def test_an_oversized_body_is_refused_without_reading_it_all(
    gated: tuple[SidecarServer, _Recording, _Gated], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, _, _ = gated
    monkeypatch.setattr(sidecar_server, "_MAX_BODY", 1000)
    with _connect(server) as sock:
        sock.sendall(b"POST /v1/seu HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n")
        sock.sendall(b"x" * 2000)
        [(status, _, body)] = _read_answers(sock, 1)
        assert status == 413 and b"1000 bytes" in body
        assert _closed(sock)


def test_shutdown_ends_open_connections_and_their_waiting_seus() -> None:
    backend = _Gated()
    scheduler = Scheduler([backend])
    server = SidecarServer(scheduler, "127.0.0.1:0").start()
    try:
        with _connect(server) as sock:
            sock.sendall(_seu_bytes("q", "good film"))
            assert backend.entered.wait(30)
            server.shutdown()
            assert _closed(sock)
        with pytest.raises(OSError):
            _connect(server).close()
    finally:
        backend.gate.set()
        scheduler.close()
