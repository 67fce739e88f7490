"""``openai:`` gives each request thread its own connection (``backends/connections.py``).

httpx's default pool keeps 20 idle connections and closes the surplus on every pass. With more
request threads than that (32 by default for vLLM and the sim server, 128 in the LOTUS
benchmark), httpcore can close a connection another thread has just been handed and is already
sending on (encode/httpcore#1110); that request then hangs until its read timeout. This stopped
the SIMULATED LOTUS benchmark at Q2 ("no answer in time (ReadTimeout)" after 60 s). The race
itself is timing-dependent; what this test pins down over real sockets is its precondition:
bursts of ``concurrency`` requests must not make the client close (and reopen) connections.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from duckdb_sem.backends.openai import OpenAIBackend
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import OperatorKind

THREADS = 32


class _Counts:
    def __init__(self, parties: int) -> None:
        self.lock = threading.Lock()
        self.opened = 0
        self.closed = 0
        # every chat request waits for all the others: a burst needs THREADS connections at once
        self.barrier = threading.Barrier(parties, timeout=10)


class _Handler(BaseHTTPRequestHandler):
    counts: _Counts
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def handle(self) -> None:  # one call per TCP connection
        with self.counts.lock:
            self.counts.opened += 1
        try:
            super().handle()
        finally:
            with self.counts.lock:
                self.counts.closed += 1

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._send(200, {"data": [{"id": "m", "owned_by": "vllm"}]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            self.counts.barrier.wait()
        except threading.BrokenBarrierError:
            self._send(500, {"error": "fewer concurrent requests than expected"})
            return
        top = [{"token": "yes", "logprob": -0.1}, {"token": "no", "logprob": -2.4}]
        choice = {"message": {"role": "assistant", "content": "yes"},
                  "logprobs": {"content": [{**top[0], "top_logprobs": top}]}}  # fmt: skip
        self._send(
            200, {"choices": [choice], "usage": {"prompt_tokens": 9, "completion_tokens": 1}}
        )

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def server() -> Iterator[tuple[str, _Counts]]:
    counts = _Counts(THREADS)
    handler = type("_Counting", (_Handler,), {"counts": counts})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", counts
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=5)


def test_bursts_of_concurrent_requests_reuse_their_connections(
    server: tuple[str, _Counts],
) -> None:
    url, counts = server
    # one HTTP request a row (no batch route): a burst is THREADS requests at once
    backend = OpenAIBackend(url, concurrency=THREADS, batch=False)
    requests = [build_request(OperatorKind.FILTER, f"row {i}") for i in range(THREADS)]
    try:
        first = backend.complete(requests)
        opened = counts.opened
        assert opened >= THREADS  # the barrier needs every request in flight at once
        second = backend.complete(requests)
        # the pool kept every connection of the first burst: none closed, none opened again
        assert counts.opened == opened
        assert counts.closed == 0
        assert [c.value for c in first + second] == [True] * (2 * THREADS)
    finally:
        backend.close()
    deadline = time.monotonic() + 10
    while counts.closed < counts.opened and time.monotonic() < deadline:
        time.sleep(0.01)
    assert counts.closed == counts.opened  # close() closed every thread's connection
