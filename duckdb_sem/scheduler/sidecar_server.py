"""The scheduler sidecar: one process owns the backends and schedules every client's SEUs.

A stdlib threading HTTP server (one thread per connection, HTTP/1.1 keep-alive) in front of one
:class:`~duckdb_sem.scheduler.core.Scheduler`; the wire format is in :mod:`.protocol`. It
listens on ``HOST:PORT`` or on a unix socket (``unix:/path/to.sock``). Start it with
``duckdb-sem serve``; clients connect with :class:`~.sidecar_client.SidecarClient`.

A client that hangs up while its SEU waits (its process died, or it closed the connection) has
that SEU's query cancelled (:mod:`.hangup`). ``activity`` counts requests in flight, for
``serve --idle-exit`` (:mod:`.idle`); :meth:`SidecarServer.retire` removes a unix socket so
that new clients start another sidecar while this one finishes what it has; ``shutdown``
closes the connections still open.
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import logging
import os
import socket
import socketserver
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from duckdb_sem.errors import QueryCancelledError, SemError
from duckdb_sem.scheduler.core import Scheduler
from duckdb_sem.scheduler.hangup import HangupWatch
from duckdb_sem.scheduler.idle import Activity
from duckdb_sem.scheduler.latency import SeuTimes
from duckdb_sem.scheduler.local_paths import lock_path_of, start_lock
from duckdb_sem.scheduler.metrics import render_metrics
from duckdb_sem.scheduler.protocol import decode_seu, encode_error, encode_result

__all__ = ["SidecarServer", "parse_listen"]

log = logging.getLogger(__name__)


def parse_listen(listen: str) -> tuple[str, int] | str:
    """``HOST:PORT`` -> (host, port); ``unix:/path`` -> the socket path."""
    if listen.startswith("unix:"):
        path = listen.removeprefix("unix:").removeprefix("//")
        return path
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        from duckdb_sem.errors import ConfigError

        raise ConfigError(f"--listen {listen!r}: use HOST:PORT (e.g. 127.0.0.1:7300) or unix:/path")
    return (host or "127.0.0.1", int(port))


_date: tuple[int, str] = (0, "")


def _http_date() -> str:
    """The Date header's value, formatted once a second rather than once an answer."""
    global _date
    now = int(time.time())
    if _date[0] != now:
        _date = (now, email.utils.formatdate(now, usegmt=True))
    return _date[1]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any  # _TCPServer or _UnixServer: .scheduler, .activity, .hangups, .connections

    def setup(self) -> None:
        super().setup()
        if self.connection.family in (socket.AF_INET, socket.AF_INET6):
            # small request/answer pairs on keep-alive: without this, Nagle + delayed ACK
            # add ~40 ms to every SEU round trip
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.connections.add(self.connection)
        self.server.hangups.add(self.connection)

    def finish(self) -> None:
        self.server.hangups.discard(self.connection)
        self.server.connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("sidecar: " + format, *args)

    def address_string(self) -> str:
        return str(self.client_address[0]) if self.client_address else "unix"

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        # Status line, headers and body in one write: send_response + end_headers + write made
        # two sends (two packets with TCP_NODELAY) per answer, each a GIL hand-off under load.
        self.log_request(status, len(body))
        head = (
            f"{self.protocol_version} {status} {self.responses[status][0]}\r\n"
            f"Server: {self.version_string()}\r\nDate: {_http_date()}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self.wfile.write(head.encode("latin-1") + body)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def do_GET(self) -> None:
        with self.server.activity.request():
            self._get()

    def do_POST(self) -> None:
        with self.server.activity.request():
            self._post()

    def _get(self) -> None:
        scheduler: Scheduler = self.server.scheduler
        if self.path == "/v1/health":
            body = {
                "ok": True,
                "backend_id": scheduler.backend_id,
                "policy": scheduler.policy.name,
                "pid": os.getpid(),
            }
            self._send(200, json.dumps(body).encode())
        elif self.path == "/v1/status":
            self._send(200, json.dumps(scheduler.status()).encode())
        elif (url := urllib.parse.urlsplit(self.path)).path == "/v1/latency":
            query = urllib.parse.parse_qs(url.query)
            try:
                since = float(query.get("since", ["0"])[0])
            except ValueError:
                self._send(400, encode_error(SemError("since= takes a time.monotonic() reading")))
                return
            self._send(200, json.dumps(self.server.seu_times.summary(since=since)).encode())
        elif self.path == "/metrics":
            text = render_metrics(scheduler.status())
            self._send(200, text.encode(), "text/plain; version=0.0.4")
        else:
            self._send(404, encode_error(SemError(f"no such path {self.path}")))

    def _post(self) -> None:
        scheduler: Scheduler = self.server.scheduler
        try:
            data = self._body()
            if self.path == "/v1/seu":
                began = time.monotonic()
                seu = decode_seu(data)
                future = scheduler.submit(seu)
                with self.server.hangups.watching(self.connection, seu.query_id) as peer:
                    future.exception()  # waits (cheaper than wait()); raised by result() below
                if peer.gone:  # the client left: its query is cancelled, nobody to answer
                    self.close_connection = True
                    return
                self._send(200, encode_result(future.result()))
                done = time.monotonic()
                self.server.seu_times.record(finished=done, seconds=done - began)
            elif self.path in ("/v1/cancel", "/v1/finish"):
                query_id = str(json.loads(data)["query_id"])
                if self.path == "/v1/cancel":
                    scheduler.cancel(query_id)
                else:
                    scheduler.finish_query(query_id)
                self._send(200, b'{"ok": true}')
            else:
                self._send(404, encode_error(SemError(f"no such path {self.path}")))
        except QueryCancelledError as err:
            self._send(409, encode_error(err))
        except SemError as err:
            self._send(500, encode_error(err))
        except (ValueError, KeyError, TypeError) as err:
            self._send(400, encode_error(SemError(f"bad request to {self.path}: {err}")))


#: connections waiting to be accepted (socketserver's default is 5): a thousand client queries
#: connecting at once overflowed it (benchmarks/bench_sidecar_load.py)
_BACKLOG = 1024


class _Connections:
    """The connections a server is serving, to close them at shutdown: a kept-alive one would
    otherwise go on being served by its thread after the scheduler closed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.add(sock)

    def discard(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)

    def close_all(self) -> None:
        with self._lock:
            socks, self._open = list(self._open), set()
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class _TCPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = _BACKLOG

    def __init__(self, address: tuple[str, int], scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.activity = Activity()
        self.seu_times = SeuTimes()
        self.hangups = HangupWatch(scheduler.cancel)
        self.connections = _Connections()
        super().__init__(address, _Handler)


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = _BACKLOG

    def __init__(self, path: str, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.activity = Activity()
        self.seu_times = SeuTimes()
        self.hangups = HangupWatch(scheduler.cancel)
        self.connections = _Connections()
        if os.path.exists(path):
            os.unlink(path)
        super().__init__(path, _Handler)
        self.inode = os.stat(path).st_ino  # to remove only our own socket, not a successor's


class SidecarServer:
    """Serve ``scheduler`` on ``listen`` (``HOST:PORT``, port 0 picks one, or ``unix:/path``)."""

    def __init__(self, scheduler: Scheduler, listen: str = "127.0.0.1:7300") -> None:
        self.scheduler = scheduler
        where = parse_listen(listen)
        self._server: _TCPServer | _UnixServer
        if isinstance(where, str):
            self._server = _UnixServer(where, scheduler)
            self.url = f"unix://{where}"
        else:
            tcp = _TCPServer(where, scheduler)
            self._server = tcp
            self.url = f"http://{where[0]}:{tcp.server_port}"
        self._thread: threading.Thread | None = None
        self.activity = self._server.activity

    def serve_forever(self) -> None:
        self._server.serve_forever(poll_interval=0.2)

    def start(self) -> SidecarServer:
        """Serve on a background thread (tests, benchmarks); returns self."""
        self._thread = threading.Thread(target=self.serve_forever, name="sem-sidecar", daemon=True)
        self._thread.start()
        return self

    def retire(self) -> bool:
        """Stop being found: remove a unix socket (if it is still this server's), under the
        local scheduler's start lock so that no process is starting a sidecar meanwhile.
        Connections already open are still served. False when a process holds the start lock
        now (try again later); True for a TCP listener (nothing to remove)."""
        if not isinstance(self._server, _UnixServer):
            return True
        path = self.url.removeprefix("unix://")
        try:
            with start_lock(lock_path_of(Path(path)), wait=False) as held:
                if held:
                    self._unlink_own()
                return held
        except OSError:  # no lock file can be made beside it: no local scheduler to order
            self._unlink_own()
            return True

    def _unlink_own(self) -> None:
        assert isinstance(self._server, _UnixServer)
        path = self.url.removeprefix("unix://")
        try:
            if os.stat(path).st_ino == self._server.inode:
                os.unlink(path)
        except FileNotFoundError:
            pass

    def shutdown(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._server.hangups.close()
        self._server.connections.close_all()
        if isinstance(self._server, _UnixServer):
            self._unlink_own()
