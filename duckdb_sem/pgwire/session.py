"""One client session after authentication: the simple and extended query protocols.

Each session owns a ``SemConnection`` (a cursor of the server's database, held by its
:class:`~duckdb_sem.pgwire.execution.Execution`) and runs on its own thread. A simple query is
split with PostgreSQL's lexical rules (:mod:`.lexer`) and each statement is run by the
session's :class:`~duckdb_sem.pgwire.runner.Runner` (session commands, DuckDB's parser, the
isolation rules, then DuckDB); this module is the protocol around it: messages in, rows,
COPY data and errors out.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, BinaryIO

import duckdb

from duckdb_sem.errors import QueryCancelledError, SemError, UndefinedNameError
from duckdb_sem.pgwire import commands as cmd
from duckdb_sem.pgwire import messages as m
from duckdb_sem.pgwire.copy_out import encode_line
from duckdb_sem.pgwire.database import Database
from duckdb_sem.pgwire.lexer import split_statements
from duckdb_sem.pgwire.limits import SessionLimits
from duckdb_sem.pgwire.portals import Portal, Statement, param_count
from duckdb_sem.pgwire.results import Result
from duckdb_sem.pgwire.runner import TRANSACTION_COMMANDS, Runner
from duckdb_sem.pgwire.sqlstate import describe_error
from duckdb_sem.pgwire.startup import startup_settings
from duckdb_sem.pgwire.types import OID, decode_param
from duckdb_sem.session.connection import SemConnection

__all__ = ["Session"]

log = logging.getLogger(__name__)
_FLUSH_BYTES = 64 * 1024
#: rows encoded per step of a streamed result (at most a batch: DuckDB's come in 1,024)
_CHUNK_ROWS = 2048
#: a batch that took longer to produce is written at once, not when 64 kB have gathered
_SLOW_BATCH_S = 0.02


class Session:
    def __init__(
        self,
        db: Database,
        reader: BinaryIO,
        write: Callable[[bytes], None],
        *,
        startup: dict[str, str],
        max_message: int = m.MAX_MESSAGE,
        guard: Callable[[], AbstractContextManager[None]] | None = None,
        limits: SessionLimits | None = None,
    ) -> None:
        self.db = db
        self.runner = Runner(db, guard=guard, limits=limits)
        self.execution = self.runner.execution
        try:  # -c options and settings of the startup packet; a bad one: FATAL, as PostgreSQL
            self.runner.apply_startup(startup_settings(startup))
        except BaseException:
            self.con.close()
            raise
        self._reported: dict[str, str] = {}
        self.max_message = max_message
        self._reader = reader
        self._write = write
        self._out: list[bytes] = []
        self._out_size = 0

    @property
    def status(self) -> bytes:
        return self.runner.status

    @property
    def con(self) -> SemConnection:
        """The session's connection (replaced after a cancelled statement)."""
        return self.execution.con

    # -- I/O ----------------------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        self._out.append(data)
        self._out_size += len(data)
        if self._out_size >= _FLUSH_BYTES:
            self.flush()

    def parameter_changes(self) -> list[bytes]:
        """ParameterStatus of each reported setting that changed since it was last sent (at
        connect, and before ReadyForQuery as PostgreSQL sends them after a SET)."""
        out = []
        for name, value in self.runner.reported().items():
            if self._reported.get(name) != value:
                self._reported[name] = value
                out.append(m.parameter_status(name, value))
        return out

    def _ready(self) -> None:
        for message in self.parameter_changes():
            self.send(message)
        self.send(m.ready_for_query(self.status))
        self.flush()

    def flush(self) -> None:
        if self._out:
            self._write(b"".join(self._out))
            self._out.clear()
            self._out_size = 0

    def run(self) -> None:
        """Serve messages until the client terminates or disconnects."""
        self.db.routed.listen(self.execution.on_query)
        self._ready()
        skipping = False
        try:
            while True:
                message = m.read_message(self._reader, self.max_message)
                kind = message.kind
                if kind == b"X":
                    return
                if skipping and kind != b"S":
                    continue
                skipping = False
                try:
                    self._dispatch(kind, message.payload)
                except (EOFError, OSError, m.ProtocolViolation):
                    raise
                except Exception as err:  # noqa: BLE001 - any failure becomes an ErrorResponse
                    self._error(err)
                    skipping = kind not in {b"Q", b"S"}
                    if kind == b"Q":
                        self._ready()
        finally:
            self.execution.close()  # what a portal still streams stops here too
            self.runner.portals.clear()  # their rows (a DECLAREd cursor's) go with the session
            self.runner.statements.clear()

    def _dispatch(self, kind: bytes, payload: bytes) -> None:
        reader = m.Reader(payload)
        if kind == b"Q":
            self._simple_query(reader.cstring())
        elif kind == b"P":
            self._parse(reader)
        elif kind == b"B":
            self._bind(reader)
        elif kind == b"D":
            self._describe(reader)
        elif kind == b"E":
            self._execute(reader)
        elif kind == b"C":
            which, name = reader.byte(), reader.cstring()
            if which == b"S":
                self.runner.statements.pop(name, None)
            else:
                self._drop_portal(name)
            self.send(m.close_complete())
        elif kind == b"S":
            self._sync_portals()
            self._ready()
        elif kind == b"H":
            self.flush()
        elif kind in {b"F", b"d", b"c", b"f"}:
            raise SemError(f"protocol message {kind!r} is not supported (function call, COPY FROM)")
        else:
            # As PostgreSQL: a FATAL 08P01 (sent by the server), then the connection is closed.
            self.flush()
            raise m.ProtocolViolation(
                f"invalid frontend message type {kind!r}: the client does not speak protocol 3.0"
            )

    def _drop_portal(self, name: str) -> None:
        """The portal ends: what it did not send is never computed (its LLM work stops)."""
        portal = self.runner.portals.pop(name, None)
        if portal is not None:
            self.execution.discard(portal.result)

    def _sync_portals(self) -> None:
        """As PostgreSQL at Sync: the unnamed portal ends; outside a transaction block the
        implicit transaction commits, and every portal a Bind made ends with it (``DECLARE``d
        cursors stay, as if ``WITH HOLD``)."""
        names = [""]
        if self.status == b"I":
            names = [n for n, p in self.runner.portals.items() if p.bound]
        for name in names:
            self._drop_portal(name)

    def _error(self, err: BaseException) -> None:
        self.execution.close_open()
        if isinstance(err, QueryCancelledError):
            # An interrupted DuckDB result can stay pending on its connection; start clean.
            self.execution.reconnect()
        code, message = describe_error(err)
        if code == "XX000":
            log.warning("statement failed: %s", message)
        self.runner.tx.failed()
        self.send(m.error_response(code, message))

    # -- simple protocol ------------------------------------------------------------------
    def _simple_query(self, sql: str) -> None:
        statements = split_statements(sql)
        if not statements:
            self.send(m.empty_query())
        # As PostgreSQL: several statements in one Query run in one implicit transaction (unless
        # they control transactions themselves), so a failure undoes the ones before it.
        implicit = len(statements) > 1 and self.status == b"I"
        implicit = implicit and not any(
            isinstance(cmd.parse_command(s), TRANSACTION_COMMANDS) for s in statements
        )
        if implicit:
            self.execution.park_open()  # a suspended portal's reader survives the BEGIN
            self.con.execute("BEGIN TRANSACTION")
            self.db.commits.start()  # its writes commit together, at its end
        try:
            for statement in statements:
                result = self.runner.run_statement(statement, [])
                if result.has_rows and result.copy is None:
                    self.send(m.row_description(result.described()))
                self._send_rows(result, None)
        except BaseException:
            if implicit:
                with contextlib.suppress(duckdb.Error):
                    self.con.execute("ROLLBACK")
                self.db.commits.finish()
            raise
        if implicit:
            try:
                self.con.execute("COMMIT")
            finally:
                self.db.commits.finish()
        self._ready()

    def _send_rows(self, result: Result, limit: int | None) -> None:
        while result.notices:
            self.send(m.notice_response(result.notices.pop(0)))
        if result.copy is not None:
            limit = None  # as PostgreSQL: COPY ignores an Execute row limit
            if result.sent == 0:
                self.send(m.copy_out_response(len(result.fields)))
                if result.copy.header:
                    names = [f.name for f in result.fields]
                    self.send(m.copy_data(encode_line(names, result.copy)))
        # Streamed: a batch at a time as DuckDB produces it, never the whole result. ``send``
        # writes every 64 kB and a socket write blocks while the client does not read, so a
        # slow reader holds back its own session (a thread each) and nothing else. Rows that
        # waited for a slow batch (semantic work) are written at once. Rows sent before an
        # error stay sent; the ErrorResponse follows them, as in PostgreSQL.
        sent, more = 0, True
        with self.execution.busy():
            while limit is None or sent < limit:
                chunk = _CHUNK_ROWS if limit is None else min(limit - sent, _CHUNK_ROWS)
                started = time.monotonic()
                rows = self.execution.translated(functools.partial(result.step, chunk))
                if not rows:
                    more = False
                    break
                for row in rows:
                    self.send(row)
                sent += len(rows)
                if time.monotonic() - started > _SLOW_BATCH_S:
                    self.flush()
            else:  # the row limit is reached: suspended if rows remain
                more = self.execution.translated(result.more)
        if not more and result.copy is not None:
            self.send(m.copy_done())
        self.send(m.portal_suspended() if more else m.command_complete(result.tag(sent)))

    # -- extended protocol ----------------------------------------------------------------
    def _parse(self, r: m.Reader) -> None:
        name, sql = r.cstring(), r.cstring()
        oids = [r.int32() for _ in range(r.int16())]
        if len(split_statements(sql)) > 1:
            raise duckdb.ParserException(
                "cannot insert multiple commands into a prepared statement"
            )
        self.runner.statements[name] = Statement(sql, oids)
        self.send(m.parse_complete())

    def _bind(self, r: m.Reader) -> None:
        portal, name = r.cstring(), r.cstring()
        self._drop_portal(portal)  # a portal bound again: the old one's work stops
        statement = self.runner.statements.get(name)
        if statement is None:
            raise UndefinedNameError(
                f'prepared statement "{name}" does not exist', sqlstate="26000"
            )
        formats = [r.int16() for _ in range(r.int16())]
        values: list[Any] = []
        for i in range(r.int16()):
            length = r.int32()
            data = None if length < 0 else r.raw(length)
            fmt = formats[i] if len(formats) > 1 else (formats[0] if formats else 0)
            oid = statement.param_oids[i] if i < len(statement.param_oids) else 0
            values.append(decode_param(data, oid, binary=fmt == 1))
        result_formats = [r.int16() for _ in range(r.int16())]
        self.runner.portals[portal] = Portal(statement, values, result_formats, bound=True)
        self.send(m.bind_complete())

    def _describe(self, r: m.Reader) -> None:
        which, name = r.byte(), r.cstring()
        if which == b"S":
            statement = self.runner.statements.get(name)
            if statement is None:
                raise UndefinedNameError(
                    f'prepared statement "{name}" does not exist', sqlstate="26000"
                )
            count = param_count(statement.sql)
            oids = statement.param_oids + [0] * (count - len(statement.param_oids))
            self.send(m.parameter_description([o or OID["text"] for o in oids[:count]]))
            fields = self.runner.describe_sql(statement.sql, count)
            self.send(m.row_description(fields) if fields else m.no_data())
            return
        portal = self.runner.portal(name)
        result = self.runner.result(portal)
        rows = result.has_rows and result.copy is None
        self.send(m.row_description(result.described()) if rows else m.no_data())

    def _execute(self, r: m.Reader) -> None:
        name, limit = r.cstring(), r.int32()
        portal = self.runner.portal(name)
        self._send_rows(self.runner.result(portal), limit if limit > 0 else None)

    # -- cancellation ------------------------------------------------------------------------
    def cancel(self) -> None:
        """Stop the running statement (from the thread that received a CancelRequest)."""
        self.execution.cancel()
