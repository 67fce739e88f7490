"""The scheduler sidecar: one process owns the backends and schedules every client's SEUs.

An event-loop HTTP/1.1 front (one thread: ``uvloop`` where installed, asyncio's own loop
otherwise, and ``httptools``' compiled parser) in front of one
:class:`~duckdb_sem.scheduler.core.Scheduler`; the wire format is in :mod:`.protocol`. It
listens on ``HOST:PORT`` or on a unix socket (``unix:/path/to.sock``). Start it with
``duckdb-sem serve``; clients connect with :class:`~.sidecar_client.SidecarClient`.

How an SEU travels: the loop reads and parses the request, decodes the SEU and submits it to
the scheduler on the loop's own thread (``submit`` only queues and dispatches; the backends run
on the executor's threads), then goes on serving other connections. When the SEU's future is
done, the thread that finished it hands the answer back with one ``call_soon_threadsafe``, and
the loop encodes and writes it. So an SEU costs two thread hand-offs (to the executor and back)
and no thread per connection; a thread per connection, a stdlib HTTP parser and a handler
thread blocked on each future cost about half the sidecar's CPU before
(docs/scheduler.md, "The sidecar's ceiling").

Requests on one connection are answered in order (a pipelining client's second request waits
for the first's answer). A client that hangs up while its SEU waits (its process died, or it
closed the connection) has that SEU's query cancelled: the loop sees the end of the stream.
Who may ask what is :mod:`.sidecar_auth`'s: with tokens, a request without one gets 401, and
a client's queries are filed under its session's label (it sees and cancels only those); a
unix socket without tokens is made 0600 and serves only processes of its own user (the peer's
uid, ``SO_PEERCRED``). ``activity`` counts requests in flight, for ``serve --idle-exit``
(:mod:`.idle`);
:meth:`SidecarServer.retire` removes a unix socket so that new clients start another sidecar
while this one finishes what it has; :meth:`SidecarServer.shutdown` closes the connections
still open.

Work that may block on something other than the scheduler's lock runs on a small thread pool
beside the loop, so that ``/v1/health`` (the clients' liveness check) is always answered:
cancelling a query (``Backend.abort`` may call a server) and the status snapshot behind
``/v1/status`` and ``/metrics``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import email.utils
import json
import logging
import os
import socket
import stat
import struct
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import cast

import httptools

from duckdb_sem.errors import ConfigError, QueryCancelledError, SemError, SidecarAuthError
from duckdb_sem.scheduler.core import Scheduler
from duckdb_sem.scheduler.idle import Activity
from duckdb_sem.scheduler.latency import SeuTimes
from duckdb_sem.scheduler.local_paths import lock_path_of, start_lock
from duckdb_sem.scheduler.metrics import render_metrics
from duckdb_sem.scheduler.protocol import decode_seu, encode_error, encode_result
from duckdb_sem.scheduler.safe_paths import socket_at
from duckdb_sem.scheduler.seu import SEUResult
from duckdb_sem.scheduler.sidecar_auth import SESSION_HEADER, Caller, SidecarTokens, visible_status

try:  # libuv's loop: about twice as fast as asyncio's own for many small requests
    import uvloop

    _new_loop: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
except ImportError:  # pragma: no cover - uvloop is a dependency where it builds
    _new_loop = asyncio.new_event_loop

__all__ = ["SidecarServer", "parse_listen"]

log = logging.getLogger(__name__)

#: connections waiting to be accepted: a thousand client queries connecting at once overflowed
#: socketserver's default of 5 (benchmarks/bench_sidecar_load.py)
_BACKLOG = 1024
#: the largest request body read (an SEU of 128 rows of 100 kB each is ~13 MB)
_MAX_BODY = 256 << 20
#: requests read ahead of their answers on one connection before the loop stops reading it
#: (a client pipelining without reading its answers must not fill the server's memory)
_MAX_PIPELINED = 32
_SERVER = "duckdb-sem-sidecar"
#: the requests that act on the caller's queries: they need its session token
_SCOPED = frozenset(("/v1/seu", "/v1/cancel", "/v1/finish"))
_NO_SESSION = (
    f"send a session token of your own ({SESSION_HEADER} header): your queries are filed "
    "under it (duckdb-sem's SidecarClient sends one)"
)
#: what a malformed body raises while it is decoded: a 400, not a 500
_BAD_REQUEST = (ValueError, KeyError, TypeError, IndexError)


def parse_listen(listen: str) -> tuple[str, int] | str:
    """``HOST:PORT`` -> (host, port); ``unix:/path`` -> the socket path."""
    if listen.startswith("unix:"):
        path = listen.removeprefix("unix:").removeprefix("//")
        return path
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
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


def _response(
    status: int, body: bytes, content_type: str, *, close: bool, extra: str = ""
) -> bytes:
    """Status line, headers and body as one buffer: one write, one packet for small answers."""
    closing = ("Connection: close\r\n" if close else "") + extra
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\nServer: {_SERVER}\r\n"
        f"Date: {_http_date()}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n{closing}\r\n"
    )
    return head.encode("latin-1") + body


@dataclass(frozen=True, slots=True)
class _Request:
    method: str
    path: str
    body: bytes
    keep_alive: bool
    authorization: str = ""
    session: str = ""
    caller: Caller | None = None  # who sent it, once its token is checked (None: no tokens)


class _Connection(asyncio.Protocol):
    """One client connection, served on the loop: requests parsed by ``httptools`` as bytes
    arrive, answered one at a time in order."""

    def __init__(self, front: _Front) -> None:
        self._front = front
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self._url = b""
        self._body: list[bytes] = []
        self._size = 0
        self._headers: dict[bytes, bytes] = {}  # only those auth reads
        self._requests: deque[_Request] = deque()
        self._busy = False  # a request is being answered (an SEU may be waiting)
        self._in_next = False  # _next's loop is running (answers do not recurse into it)
        self._too_big = False
        self._write_paused = False  # the transport's buffer is full: the client reads slowly
        self._read_paused = False
        self._waiting: str | None = None  # the query id of the SEU waiting, if any
        self._gone = False  # the client hung up or the server closed the connection

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's do not subclass it
        sock = transport.get_extra_info("socket")
        if sock is not None and self._front.tokens is None and not _same_user(sock):
            log.warning("sidecar: refused a connection from another user's process")
            self._refuse(403, "this sidecar serves only its own user's processes")
            return
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # small request/answer pairs on keep-alive: without this, Nagle + delayed ACK add
            # ~40 ms to every SEU round trip (uvloop and asyncio set it too; be sure)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._front.connections.add(self)

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._refuse(400, "upgrades are not served")
        except Exception as err:  # noqa: BLE001 - httptools' errors, or a callback's
            if self._too_big:
                self._refuse(413, f"request body over {_MAX_BODY} bytes")
            else:
                self._refuse(400, f"malformed HTTP request: {err}")

    def eof_received(self) -> bool:
        self._hung_up()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._hung_up()
        self._front.connections.discard(self)

    def pause_writing(self) -> None:
        self._write_paused = True
        self._flow()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._flow()

    def _flow(self) -> None:
        """Read while the client reads its answers and has few requests waiting; otherwise
        stop reading (TCP then stops the client) until it catches up."""
        if self._transport is None or self._gone:
            return
        stop = self._write_paused or len(self._requests) >= _MAX_PIPELINED
        if stop and not self._read_paused:
            self._transport.pause_reading()
        elif not stop and self._read_paused:
            self._transport.resume_reading()
        self._read_paused = stop

    # -- httptools callbacks ---------------------------------------------------------------
    def on_message_begin(self) -> None:
        self._url = b""
        self._body = []
        self._size = 0
        self._headers = {}

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.lower()
        if key in _AUTH_HEADERS:
            self._headers[key] = self._headers.get(key, b"") + value

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._size > _MAX_BODY:
            self._too_big = True
            raise ValueError("request body too large")  # stops the parser
        self._body.append(body)

    def on_message_complete(self) -> None:
        method = self._parser.get_method().decode("latin-1")
        request = _Request(
            method,
            self._url.decode("latin-1"),
            b"".join(self._body),
            self._parser.should_keep_alive(),
            self._headers.get(b"authorization", b"").decode("latin-1"),
            self._headers.get(_SESSION, b"").decode("latin-1"),
        )
        self._requests.append(request)
        self._next()
        self._flow()

    # -- answering -------------------------------------------------------------------------
    def _next(self) -> None:
        """Serve the requests that wait, in order, while none is being answered."""
        if self._in_next:  # an answer given inside the loop below: the loop goes on
            return
        self._in_next = True
        try:
            while self._requests and not self._busy and not self._gone:
                request = self._requests.popleft()
                self._busy = True
                self._front.activity.begin()
                try:
                    self._front.handle(self, request)
                except Exception as err:
                    log.exception("sidecar: %s %s failed", request.method, request.path)
                    if self._busy:  # not answered before it failed
                        self.answer(request, 500, encode_error(SemError(f"internal error: {err}")))
        finally:
            self._in_next = False

    def answer(
        self,
        request: _Request,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        *,
        extra: str = "",
    ) -> None:
        """Send the answer to ``request`` (on the loop) and go on with the next request."""
        if not self._gone and self._transport is not None:
            close = not request.keep_alive
            self._transport.write(_response(status, body, content_type, close=close, extra=extra))
            if close:
                self._gone = True
                self._transport.close()
        self.release()

    def release(self) -> None:
        """The current request is over, answered or not (its client left)."""
        self._waiting = None
        if self._busy:
            self._busy = False
            self._front.activity.end()
        self._next()
        self._flow()

    def wait_for(self, query_id: str) -> None:
        """An SEU of ``query_id`` waits: a hang-up until its answer cancels that query."""
        self._waiting = query_id

    @property
    def gone(self) -> bool:
        return self._gone

    def close(self) -> None:
        """Close from the server's side (shutdown): the client sees the connection end."""
        self._gone = True
        self._waiting = None  # not a hang-up: its query is not cancelled
        if self._transport is not None:
            self._transport.abort()

    def _hung_up(self) -> None:
        if self._gone and self._waiting is None:
            return
        self._gone = True
        query_id, self._waiting = self._waiting, None
        if query_id is not None:
            log.info("sidecar: a client hung up; cancelling query %s", query_id)
            self._front.cancel_later(query_id)

    def _refuse(self, status: int, message: str) -> None:
        if self._transport is not None and not self._gone:
            self._transport.write(
                _response(status, encode_error(SemError(message)), "application/json", close=True)
            )
            self._gone = True
            self._transport.close()


def _ok(act: Callable[[str], None], query_id: str) -> bytes:
    act(query_id)
    return b'{"ok": true}'


_SESSION = SESSION_HEADER.encode()
_AUTH_HEADERS = frozenset((b"authorization", _SESSION))
_UNAUTHORIZED = (
    "this sidecar requires a token on every request: pass it in the scheduler URL "
    "(DUCKDB_SEM_SCHEDULER=http://:TOKEN@HOST:PORT, or ?token=TOKEN) or in "
    "DUCKDB_SEM_SCHEDULER_TOKEN; `duckdb-sem serve` writes its tokens to the token file it "
    "names when it starts"
)


def _same_user(sock: socket.socket) -> bool:
    """Whether the peer of a unix connection runs as this process's user (or root); True
    where the kernel cannot say (not a unix socket, no SO_PEERCRED)."""
    peercred = getattr(socket, "SO_PEERCRED", None)
    if sock.family != socket.AF_UNIX or peercred is None:
        return True
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, peercred, struct.calcsize("3i"))
    except OSError:
        return True
    _pid, uid, _gid = struct.unpack("3i", raw)
    return uid in (os.getuid(), 0)


class _Front:
    """What every connection of one server shares: the scheduler, the loop, the side pool."""

    def __init__(
        self,
        scheduler: Scheduler,
        loop: asyncio.AbstractEventLoop,
        tokens: SidecarTokens | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.loop = loop
        self.tokens = tokens
        self.activity = Activity()
        self.seu_times = SeuTimes()
        self.connections: set[_Connection] = set()
        self.side = ThreadPoolExecutor(max_workers=4, thread_name_prefix="sem-sidecar-side")

    def handle(self, conn: _Connection, request: _Request) -> None:
        if self.tokens is not None:
            caller = self.tokens.caller(request.authorization, request.session)
            if caller is None:
                body = encode_error(SidecarAuthError(_UNAUTHORIZED))
                extra = 'WWW-Authenticate: Bearer realm="duckdb-sem"\r\n'
                conn.answer(request, 401, body, extra=extra)
                return
            request = dataclasses.replace(request, caller=caller)
        if request.method == "GET":
            self._get(conn, request)
        elif request.method == "POST":
            self._post(conn, request)
        else:
            body = encode_error(SemError(f"method {request.method} is not served; use GET/POST"))
            conn.answer(request, 501, body)

    def _get(self, conn: _Connection, request: _Request) -> None:
        scheduler = self.scheduler
        path, caller = request.path, request.caller
        if path == "/v1/health":
            body = {
                "ok": True,
                "backend_id": scheduler.backend_id,
                "policy": scheduler.policy.name,
                "pid": os.getpid(),
            }
            conn.answer(request, 200, json.dumps(body).encode())
        elif path == "/v1/status":
            self._beside(
                conn,
                request,
                lambda: json.dumps(visible_status(scheduler.status(), caller)).encode(),
            )
        elif path == "/metrics":
            self._beside(
                conn,
                request,
                lambda: render_metrics(visible_status(scheduler.status(), caller)).encode(),
                "text/plain; version=0.0.4",
            )
        elif (url := urllib.parse.urlsplit(path)).path == "/v1/latency":
            query = urllib.parse.parse_qs(url.query)
            try:
                since = float(query.get("since", ["0"])[0])
            except ValueError:
                conn.answer(
                    request, 400, encode_error(SemError("since= takes a time.monotonic() reading"))
                )
                return
            conn.answer(request, 200, json.dumps(self.seu_times.summary(since=since)).encode())
        else:
            conn.answer(request, 404, encode_error(SemError(f"no such path {path}")))

    def _post(self, conn: _Connection, request: _Request) -> None:
        path, caller = request.path, request.caller
        try:
            if caller is not None and caller.label is None and path in _SCOPED:
                conn.answer(request, 400, encode_error(SemError(_NO_SESSION)))
            elif path == "/v1/seu":
                self._seu(conn, request)
            elif path in ("/v1/cancel", "/v1/finish"):
                query_id = str(json.loads(request.body)["query_id"])
                if caller is not None:  # only the caller's own (the operator's: any)
                    query_id = caller.target(query_id)
                act = self.scheduler.cancel if path == "/v1/cancel" else self.scheduler.finish_query
                self._beside(conn, request, lambda: _ok(act, query_id))
            else:
                conn.answer(request, 404, encode_error(SemError(f"no such path {path}")))
        except QueryCancelledError as err:
            conn.answer(request, 409, encode_error(err))
        except SemError as err:
            conn.answer(request, 500, encode_error(err))
        except _BAD_REQUEST as err:
            conn.answer(request, 400, encode_error(SemError(f"bad request to {path}: {err}")))

    def _seu(self, conn: _Connection, request: _Request) -> None:
        began = time.monotonic()
        seu = decode_seu(request.body)
        if request.caller is not None:
            seu = request.caller.own(seu)
        future = self.scheduler.submit(seu)
        if future.done():  # all from the cache, or refused: answer now
            self._seu_done(conn, request, future, began)
            return
        conn.wait_for(seu.query_id)

        def done(fut: Future[SEUResult]) -> None:  # on the thread that finished the SEU
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody to answer
                self.loop.call_soon_threadsafe(self._seu_done, conn, request, fut, began)

        future.add_done_callback(done)

    def _seu_done(
        self, conn: _Connection, request: _Request, future: Future[SEUResult], began: float
    ) -> None:
        if conn.gone:  # the client left: its query is cancelled, nobody to answer
            conn.release()
            return
        err = future.exception()
        if err is None:
            conn.answer(request, 200, encode_result(future.result()))
            done = time.monotonic()
            self.seu_times.record(finished=done, seconds=done - began)
        elif isinstance(err, QueryCancelledError):
            conn.answer(request, 409, encode_error(err))
        elif isinstance(err, SemError):
            conn.answer(request, 500, encode_error(err))
        else:
            conn.answer(request, 500, encode_error(SemError(f"{type(err).__name__}: {err}")))

    def _beside(
        self,
        conn: _Connection,
        request: _Request,
        work: Callable[[], bytes],
        content_type: str = "application/json",
    ) -> None:
        """Run ``work`` on the side pool and answer with what it returns (or its error)."""

        def finished(fut: Future[bytes]) -> None:
            err = fut.exception()
            if err is None:
                conn.answer(request, 200, fut.result(), content_type)
            elif isinstance(err, SemError):
                conn.answer(request, 500, encode_error(err))
            elif isinstance(err, _BAD_REQUEST):
                body = encode_error(SemError(f"bad request to {request.path}: {err}"))
                conn.answer(request, 400, body)
            else:
                conn.answer(request, 500, encode_error(SemError(f"{type(err).__name__}: {err}")))

        future = self.side.submit(work)
        future.add_done_callback(lambda fut: self._soon(finished, fut))

    def cancel_later(self, query_id: str) -> None:
        """Cancel a query whose client hung up (off the loop: an abort may call a server)."""

        def cancel() -> None:
            try:
                self.scheduler.cancel(query_id)
            except Exception as err:  # noqa: BLE001 - the server must go on
                log.warning("cancelling query %s failed: %s", query_id, err)

        with contextlib.suppress(RuntimeError):  # shut down: nothing to cancel for
            self.side.submit(cancel)

    def _soon(self, fn: Callable[[Future[bytes]], None], fut: Future[bytes]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed
            self.loop.call_soon_threadsafe(fn, fut)


class SidecarServer:
    """Serve ``scheduler`` on ``listen`` (``HOST:PORT``, port 0 picks one, or ``unix:/path``).

    The listening socket is bound here (so a taken port or a bad path fails at once);
    :meth:`serve_forever` runs the loop in the calling thread, :meth:`start` on a thread of its
    own. ``activity`` and ``seu_times`` are the server's request counters (:mod:`.idle`,
    :mod:`.latency`).
    """

    def __init__(
        self,
        scheduler: Scheduler,
        listen: str = "127.0.0.1:7300",
        *,
        tokens: SidecarTokens | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.tokens = tokens
        self._loop = _new_loop()
        self._front = _Front(scheduler, self._loop, tokens)
        self.activity = self._front.activity
        self.seu_times = self._front.seu_times
        self._inode: int | None = None
        where = parse_listen(listen)
        if isinstance(where, str):
            if socket_at(Path(where), own=False):  # a stale one; anything else is refused
                os.unlink(where)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.bind(where)
                if tokens is None:  # this user's alone (root can connect anyway)
                    os.chmod(where, stat.S_IRUSR | stat.S_IWUSR)
            except OSError:
                sock.close()
                raise
            self._inode = os.stat(where).st_ino  # to remove only our own socket, not a successor's
            self.url = f"unix://{where}"
            sock.listen(_BACKLOG)
        else:
            sock = socket.create_server(where, backlog=_BACKLOG)  # SO_REUSEADDR on POSIX
            if tokens is None:  # in-process servers of tests and benchmarks; serve gives tokens
                log.warning(
                    "sidecar on %s:%s without tokens: anyone who reaches it may use it", *where
                )
            self.url = f"http://{where[0]}:{sock.getsockname()[1]}"
        self._sock = sock
        self._thread: threading.Thread | None = None
        self._serving = threading.Event()
        self._stopped = threading.Event()
        self._stopping = False

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` (from another thread)."""
        loop = self._loop
        asyncio.set_event_loop(loop)
        factory = lambda: _Connection(self._front)  # noqa: E731
        try:
            if self._inode is not None:
                server = loop.run_until_complete(loop.create_unix_server(factory, sock=self._sock))
            else:
                server = loop.run_until_complete(loop.create_server(factory, sock=self._sock))
            self._serving.set()
            if not self._stopping:
                loop.run_forever()
            server.close()
            for conn in list(self._front.connections):
                conn.close()
            loop.run_until_complete(asyncio.sleep(0))  # let the transports close
        finally:
            self._serving.set()
            loop.close()
            self._stopped.set()

    def start(self) -> SidecarServer:
        """Serve on a background thread (tests, benchmarks); returns self."""
        self._thread = threading.Thread(target=self.serve_forever, name="sem-sidecar", daemon=True)
        self._thread.start()
        self._serving.wait()
        return self

    def retire(self) -> bool:
        """Stop being found: remove a unix socket (if it is still this server's), under the
        local scheduler's start lock so that no process is starting a sidecar meanwhile.
        Connections already open are still served. False when a process holds the start lock
        now (try again later); True for a TCP listener (nothing to remove)."""
        if self._inode is None:
            return True
        path = self.url.removeprefix("unix://")
        try:
            with start_lock(lock_path_of(Path(path)), wait=False) as held:
                if held:
                    self._unlink_own()
                return held
        except (OSError, SemError):  # no lock file beside it (or not a safe one): no local
            self._unlink_own()  # scheduler to order
            return True

    def _unlink_own(self) -> None:
        path = self.url.removeprefix("unix://")
        try:
            if os.stat(path).st_ino == self._inode:
                os.unlink(path)
        except FileNotFoundError:
            pass

    def shutdown(self) -> None:
        """Stop accepting, close every open connection (their clients see it end), stop the
        loop and remove a unix socket. Waits for the loop if it is running."""
        self._stopping = True
        if self._serving.is_set() and not self._stopped.is_set():
            with contextlib.suppress(RuntimeError):  # closed meanwhile
                self._loop.call_soon_threadsafe(self._loop.stop)
            self._stopped.wait(10.0)
        elif not self._serving.is_set():  # never served: nothing runs the loop
            self._loop.close()
        with contextlib.suppress(OSError):
            self._sock.close()
        self._front.side.shutdown(wait=False, cancel_futures=True)
        if self._inode is not None:
            self._unlink_own()
