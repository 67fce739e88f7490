"""The listener: TLS negotiation, startup, SCRAM authentication, cancel requests, a thread each.

A connection's first packet is a startup message, an SSLRequest (answered ``S`` and wrapped
when TLS is configured, ``N`` otherwise), or a CancelRequest carrying the process id and secret
handed out in BackendKeyData; a matching cancel stops that session's running statement.

Limits (:class:`ServerOptions`): at most ``max_connections`` connections (one more gets FATAL
53300, as PostgreSQL's ``max_connections``); startup and authentication must finish within
``auth_timeout`` seconds (``authentication_timeout``); a message before authentication may be at
most ``MAX_AUTH_MESSAGE`` bytes, after it ``max_message`` bytes (FATAL 08P01, nothing of it
read). A client that disconnects while its statement runs has the statement cancelled
(:mod:`.hangup`). The operator's caps on LLM work (``limits``, :mod:`.limits`) bind every
session: per query, per session and, over all sessions, per day.

After authentication the session applies the startup packet's settings (``-c`` options,
``application_name``, :mod:`.startup`) before the server reports its parameters, so a client
that connects with ``-c TimeZone=Asia/Tokyo`` is told ``TimeZone=Asia/Tokyo``; a setting
PostgreSQL would refuse ends the connection with its FATAL error.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import secrets
import socket
import ssl
import struct
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import BinaryIO

import duckdb

from duckdb_sem.errors import ConfigError, SemError
from duckdb_sem.pgwire import messages as m
from duckdb_sem.pgwire.auth import MECHANISM, AuthFailed, ScramExchange, Verifier
from duckdb_sem.pgwire.catalog import SERVER_VERSION
from duckdb_sem.pgwire.database import Database
from duckdb_sem.pgwire.hangup import HangupWatcher
from duckdb_sem.pgwire.limits import Limiter, OperatorLimits, SessionLimits
from duckdb_sem.pgwire.memory import release_freed_memory
from duckdb_sem.pgwire.session import Session
from duckdb_sem.pgwire.sqlstate import describe_error

__all__ = ["ServerOptions", "WireServer", "served_names"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ServerOptions:
    host: str = "127.0.0.1"
    port: int = 5433
    #: user name -> SCRAM verifier; empty: no password asked (trust)
    users: Mapping[str, Verifier] = field(default_factory=dict)
    tls_cert: str | None = None
    tls_key: str | None = None
    require_tls: bool = False
    max_connections: int = 100
    auth_timeout: float = 10.0
    max_message: int = m.MAX_MESSAGE
    #: the operator's caps on LLM work, which no client SET can raise
    limits: OperatorLimits = field(default_factory=OperatorLimits)


class _Startup(Exception):
    """Ends a connection during startup with a FATAL error (code, message)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class WireServer:
    def __init__(self, db: Database, options: ServerOptions) -> None:
        self.db = db
        self.options = options
        self._ssl: ssl.SSLContext | None = None
        if options.tls_cert:
            self._ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self._ssl.load_cert_chain(options.tls_cert, options.tls_key)
        self._sessions: dict[int, tuple[int, Session]] = {}
        self._pids = itertools.count(1000)
        self._lock = threading.Lock()
        self._connections = 0
        self._refusing = 0
        self._hangups = HangupWatcher()
        self._limiter = Limiter(options.limits, db.settings)  # holds the day's quota
        self._sock = _listen(options.host, options.port)
        self.port = int(self._sock.getsockname()[1])
        self._closed = threading.Event()
        if not _is_loopback(options.host) and not options.users:
            log.warning(
                "listening on %s without users: anyone who can reach it can query", options.host
            )

    def serve_forever(self) -> None:
        log.info("duckdb-sem pgwire listening on %s:%d", self.options.host, self.port)
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                if self._closed.is_set():
                    return
                raise
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                admitted = self._connections < self.options.max_connections
                self._connections += admitted
                # A flood past the cap is not answered one thread each: closed at once.
                answered = admitted or self._refusing < _MAX_REFUSING
                self._refusing += not admitted and answered
            if not answered:
                conn.close()
                continue
            target = self._handle if admitted else self._refuse
            threading.Thread(target=target, args=(conn,), daemon=True).start()

    def shutdown(self) -> None:
        self._closed.set()
        self._sock.close()
        self._hangups.close()

    def _refuse(self, conn: socket.socket) -> None:
        """Over ``max_connections``: read the first packet, answer FATAL 53300, close."""
        stream: BinaryIO | None = None
        try:
            conn.settimeout(2.0)
            stream = conn.makefile("rb")
            code, _ = m.read_startup(stream)
            if code in (m.SSL_REQUEST, m.GSSENC_REQUEST):  # answer in plain text, as PostgreSQL
                conn.sendall(b"N")
                m.read_startup(stream)
            text = (
                f"sorry, too many clients already (max_connections={self.options.max_connections})"
            )
            conn.sendall(m.fatal_response("53300", text))
        except (OSError, EOFError, m.ProtocolViolation):
            pass
        finally:
            _close(conn, stream)
            with self._lock:
                self._refusing -= 1

    # -- one connection ---------------------------------------------------------------------
    def _handle(self, conn: socket.socket) -> None:
        sock: socket.socket = conn
        stream: BinaryIO | None = None
        try:
            sock.settimeout(self.options.auth_timeout)
            stream = sock.makefile("rb")
            code, body = m.read_startup(stream)
            encrypted = False
            while code in (m.SSL_REQUEST, m.GSSENC_REQUEST):
                if code == m.SSL_REQUEST and self._ssl is not None and not encrypted:
                    sock.sendall(b"S")
                    sock = self._ssl.wrap_socket(sock, server_side=True)  # detaches ``conn``
                    stream = sock.makefile("rb")
                    encrypted = True
                else:
                    sock.sendall(b"N")
                code, body = m.read_startup(stream)
            if code == m.CANCEL_REQUEST:
                self._cancel(*struct.unpack("!ii", body[:8]))
                return
            try:
                self._serve(sock, stream, code, body, encrypted=encrypted)
            except _Startup as err:
                sock.sendall(m.fatal_response(err.code, str(err)))
        except m.ProtocolViolation as err:
            log.info("closing a connection: %s", err)
            with _quietly():
                sock.sendall(m.fatal_response("08P01", str(err)))
                _linger(sock)
        except TimeoutError:
            log.info(
                "closing a connection that did not authenticate within %.0f s",
                self.options.auth_timeout,
            )
        except (EOFError, ConnectionError, ssl.SSLError) as err:
            log.debug("connection closed: %s", err)
        except Exception:
            log.exception("connection failed")
        finally:
            with self._lock:
                self._connections -= 1
            _close(sock, stream)
            release_freed_memory()  # the session's thread arena keeps what it freed otherwise

    def _serve(
        self, sock: socket.socket, stream: BinaryIO, code: int, body: bytes, *, encrypted: bool
    ) -> None:
        if code != m.PROTOCOL_3:
            raise _Startup("0A000", f"unsupported frontend protocol {code >> 16}.{code & 0xFFFF}")
        parts = body.split(b"\0")
        params = {
            k.decode(): v.decode() for k, v in zip(parts[::2], parts[1::2], strict=False) if k
        }
        if self.options.require_tls and not encrypted:
            raise _Startup("28000", "this server accepts only TLS connections (sslmode=require)")
        user = params.get("user", "")
        if self.options.users:
            self._authenticate(sock, stream, user)
        database = params.get("database") or user  # libpq's default, as PostgreSQL reads it
        if database not in served_names(self.db):
            raise _Startup("3D000", f'database "{database}" does not exist')
        sock.settimeout(None)
        pid, secret = next(self._pids), secrets.randbits(31)
        sock.sendall(m.auth_ok())
        fd = sock.fileno()
        session: Session | None = None

        def cancel() -> None:
            if session is not None:
                session.cancel()

        try:
            session = Session(
                self.db,
                stream,
                sock.sendall,
                startup=params,
                max_message=self.options.max_message,
                guard=lambda: self._hangups.watching(fd, cancel),
                limits=SessionLimits(self._limiter),
            )
        except (SemError, duckdb.Error) as err:
            raise _Startup(*describe_error(err)) from None
        sock.sendall(b"".join(self._greeting(params, pid, secret, session)))
        with self._lock:
            self._sessions[pid] = (secret, session)
        try:
            session.run()
        finally:
            with self._lock:
                self._sessions.pop(pid, None)
            # ``cancel`` (in the session's guard) holds the session: a cycle that would keep
            # its cursors' rows and its socket until a garbage collection
            session = None

    def _greeting(
        self, params: dict[str, str], pid: int, secret: int, session: Session
    ) -> list[bytes]:
        status = {
            "server_version": SERVER_VERSION,
            "server_encoding": "UTF8",
            "client_encoding": "UTF8",
            "DateStyle": "ISO, MDY",
            "IntervalStyle": "postgres",
            "integer_datetimes": "on",
            "standard_conforming_strings": "on",
            "is_superuser": "off",
            "session_authorization": params.get("user", ""),
        }
        out = [m.parameter_status(k, v) for k, v in status.items()]
        out += session.parameter_changes()  # TimeZone, application_name: as the session has them
        out.append(m.backend_key_data(pid, secret))
        return out

    def _authenticate(self, sock: socket.socket, stream: BinaryIO, user: str) -> None:
        exchange = ScramExchange(self.options.users.get(user))
        sock.sendall(m.auth_sasl([MECHANISM]))
        try:
            first = m.read_message(stream, m.MAX_AUTH_MESSAGE)
            reader = m.Reader(first.payload)
            mechanism = reader.cstring()
            if first.kind != b"p" or mechanism != MECHANISM:
                raise AuthFailed(f"expected SASL {MECHANISM}, got {mechanism!r}")
            length = reader.int32()
            sock.sendall(m.auth_sasl_continue(exchange.server_first(reader.raw(length))))
            final = m.read_message(stream, m.MAX_AUTH_MESSAGE)
            sock.sendall(m.auth_sasl_final(exchange.server_final(final.payload)))
        except AuthFailed:
            raise _Startup("28P01", f'password authentication failed for user "{user}"') from None

    def _cancel(self, pid: int, secret: int) -> None:
        with self._lock:
            entry = self._sessions.get(pid)
        if entry is None or entry[0] != secret:
            log.info("ignored cancel request for unknown backend %d", pid)
            return
        log.info("cancel request for backend %d", pid)
        entry[1].cancel()


def _listen(host: str, port: int) -> socket.socket:
    try:
        sock = socket.create_server((host, port), reuse_port=False)
    except OSError as err:
        if err.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"port {port} on {host} is already in use (another duckdb-sem pgwire, or "
                "PostgreSQL?): stop it, or choose another port with --listen HOST:PORT"
            ) from None
        raise ConfigError(
            f"cannot listen on {host}:{port}: {err.strerror}; check --listen HOST:PORT"
        ) from None
    sock.listen(256)
    return sock


def served_names(db: Database) -> frozenset[str]:
    """Database names a client may connect to: the file's (its stem, ``current_database()``)
    and ``postgres``, the database PostgreSQL always has and tools connect to by default
    (``psql -l``, pgAdmin, DBeaver); both serve the same database."""
    return frozenset({db.name, "postgres"})


def _close(sock: socket.socket, stream: BinaryIO | None) -> None:
    """Close the connection now: a ``makefile`` stream left open keeps the descriptor, and the
    peer's socket waits (CLOSE-WAIT here, FIN-WAIT-2 there: node pg's ``end()`` never returns)
    until that stream is collected."""
    with _quietly():
        if stream is not None:
            stream.close()
    sock.close()


def _linger(sock: socket.socket) -> None:
    """Let the client read the error: closing with its bytes unread would reset the connection."""
    sock.shutdown(socket.SHUT_WR)
    sock.settimeout(0.5)
    drained = 0
    while drained < _LINGER_BYTES and (chunk := sock.recv(1 << 20)):
        drained += len(chunk)


_LINGER_BYTES = 16 * 1024 * 1024
#: connections past max_connections answered (FATAL 53300) at the same time; more are closed
_MAX_REFUSING = 32


def _quietly() -> contextlib.AbstractContextManager[None]:
    return contextlib.suppress(OSError)


def _is_loopback(host: str) -> bool:
    return host in {"127.0.0.1", "::1", "localhost"}
