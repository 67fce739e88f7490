"""One client session after authentication: the simple and extended query protocols.

Each session owns a ``SemConnection`` (a cursor of the server's database, held by its
:class:`~duckdb_sem.pgwire.execution.Execution`) and runs on its own thread. A simple query is
split with PostgreSQL's lexical rules (:mod:`.lexer`); each statement goes through
:func:`~duckdb_sem.pgwire.commands.parse_command` first (session variables in :mod:`.settings`,
transactions and savepoints in :mod:`.transaction`, cursors here), else DuckDB's parser
(:mod:`.statements`), the isolation rules (:mod:`.policy`), the catalog and PostgreSQL-source
rewrites, then DuckDB (:mod:`.execution`). Portals (:mod:`.portals`) and ``DECLARE``d cursors
share one namespace, as in PostgreSQL, so a client may ``Describe`` a declared cursor
(psycopg's server-side cursors do).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, BinaryIO

import duckdb

from duckdb_sem.connection import SemConnection
from duckdb_sem.errors import PlanError, QueryCancelledError, SemError
from duckdb_sem.pgwire import commands as cmd
from duckdb_sem.pgwire import messages as m
from duckdb_sem.pgwire import statements as st
from duckdb_sem.pgwire.copy_out import copy_format, encode_line
from duckdb_sem.pgwire.database import Database
from duckdb_sem.pgwire.execution import Execution
from duckdb_sem.pgwire.lexer import split_statements
from duckdb_sem.pgwire.portals import Portal, Statement, param_count
from duckdb_sem.pgwire.results import Result
from duckdb_sem.pgwire.settings import run_setting
from duckdb_sem.pgwire.sqlstate import describe_error
from duckdb_sem.pgwire.transaction import Transaction, Write
from duckdb_sem.pgwire.types import OID, decode_param

__all__ = ["Session"]

log = logging.getLogger(__name__)
_FLUSH_BYTES = 64 * 1024


class _TxAborted(SemError):
    sqlstate = "25P02"  # in_failed_sql_transaction


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
    ) -> None:
        self.db = db
        self.execution = Execution(db, guard=guard)
        self.max_message = max_message
        self._reader = reader
        self._write = write
        self._out: list[bytes] = []
        self._out_size = 0
        self.settings = dict(cmd.SESSION_DEFAULTS)
        self.settings["application_name"] = startup.get("application_name", "")
        self.tx = Transaction()
        self._statements: dict[str, Statement] = {}
        self._portals: dict[str, Portal] = {}
        #: statements of SQL-level PREPARE, so EXECUTE returns what they return
        self._prepared: dict[str, st.Parsed] = {}

    @property
    def status(self) -> bytes:
        return self.tx.status

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

    def flush(self) -> None:
        if self._out:
            self._write(b"".join(self._out))
            self._out.clear()
            self._out_size = 0

    def run(self) -> None:
        """Serve messages until the client terminates or disconnects."""
        self.db.routed.listen(self.execution.on_query)
        self.send(m.ready_for_query(self.status))
        self.flush()
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
                        self.send(m.ready_for_query(self.status))
                        self.flush()
        finally:
            self.con.close()

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
            (self._statements if which == b"S" else self._portals).pop(name, None)
            self.send(m.close_complete())
        elif kind == b"S":
            self._portals.pop("", None)
            self.send(m.ready_for_query(self.status))
            self.flush()
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

    def _error(self, err: BaseException) -> None:
        self.execution.close_open()
        if isinstance(err, QueryCancelledError):
            # An interrupted DuckDB result can stay pending on its connection; start clean.
            self.execution.reconnect()
        code, message = describe_error(err)
        if code == "XX000":
            log.warning("statement failed: %s", message)
        self.tx.failed()
        self.send(m.error_response(code, message))

    # -- simple protocol ------------------------------------------------------------------
    def _simple_query(self, sql: str) -> None:
        statements = split_statements(sql)
        if not statements:
            self.send(m.empty_query())
        for statement in statements:
            result = self.run_statement(statement, [])
            if result.has_rows and result.copy is None:
                self.send(m.row_description(result.described()))
            self._send_rows(result, None)
        self.send(m.ready_for_query(self.status))
        self.flush()

    def _send_rows(self, result: Result, limit: int | None) -> None:
        if result.copy is not None:
            limit = None  # as PostgreSQL: COPY ignores an Execute row limit
            if result.sent == 0:
                self.send(m.copy_out_response(len(result.fields)))
                if result.copy.header:
                    names = [f.name for f in result.fields]
                    self.send(m.copy_data(encode_line(names, result.copy)))
        with self.execution.busy():
            rows, more = self.execution.translated(lambda: result.take(limit))
        for row in rows:
            self.send(row)
        if not more and result.copy is not None:
            self.send(m.copy_done())
        self.send(m.portal_suspended() if more else m.command_complete(result.tag()))

    # -- extended protocol ----------------------------------------------------------------
    def _parse(self, r: m.Reader) -> None:
        name, sql = r.cstring(), r.cstring()
        oids = [r.int32() for _ in range(r.int16())]
        if len(split_statements(sql)) > 1:
            raise duckdb.ParserException(
                "cannot insert multiple commands into a prepared statement"
            )
        self._statements[name] = Statement(sql, oids)
        self.send(m.parse_complete())

    def _bind(self, r: m.Reader) -> None:
        portal, name = r.cstring(), r.cstring()
        statement = self._statements.get(name)
        if statement is None:
            raise SemError(f"prepared statement {name!r} does not exist")
        formats = [r.int16() for _ in range(r.int16())]
        values: list[Any] = []
        for i in range(r.int16()):
            length = r.int32()
            data = None if length < 0 else r.raw(length)
            fmt = formats[i] if len(formats) > 1 else (formats[0] if formats else 0)
            oid = statement.param_oids[i] if i < len(statement.param_oids) else 0
            values.append(decode_param(data, oid, binary=fmt == 1))
        result_formats = [r.int16() for _ in range(r.int16())]
        self._portals[portal] = Portal(statement, values, result_formats)
        self.send(m.bind_complete())

    def _describe(self, r: m.Reader) -> None:
        which, name = r.byte(), r.cstring()
        if which == b"S":
            statement = self._statements.get(name)
            if statement is None:
                raise SemError(f"prepared statement {name!r} does not exist")
            count = param_count(statement.sql)
            oids = statement.param_oids + [0] * (count - len(statement.param_oids))
            self.send(m.parameter_description([o or OID["text"] for o in oids[:count]]))
            fields = self._describe_sql(statement.sql, count)
            self.send(m.row_description(fields) if fields else m.no_data())
            return
        portal = self._portal(name)
        result = self._result(portal)
        rows = result.has_rows and result.copy is None
        self.send(m.row_description(result.described()) if rows else m.no_data())

    def _execute(self, r: m.Reader) -> None:
        name, limit = r.cstring(), r.int32()
        portal = self._portal(name)
        self._send_rows(self._result(portal), limit if limit > 0 else None)

    def _portal(self, name: str) -> Portal:
        portal = self._portals.get(name)
        if portal is None:
            raise SemError(f"portal {name!r} does not exist")
        return portal

    def _result(self, portal: Portal) -> Result:
        if portal.result is None:
            if not portal.statement.sql.strip():
                portal.result = Result.command("")
            else:
                portal.result = self.run_statement(portal.statement.sql, portal.params)
            portal.result.formats = portal.formats or [0]
        return portal.result

    # -- statements --------------------------------------------------------------------------
    def run_statement(self, sql: str, params: list[Any]) -> Result:
        command = cmd.parse_command(sql)
        if self.status == b"E" and not isinstance(command, cmd.End | cmd.RollbackToSavepoint):
            raise _TxAborted(
                "current transaction is aborted, commands ignored until end of transaction block"
            )
        if command is not None:
            return self._command(command, params)
        parsed = self._parse_one(sql)
        if parsed is None:
            return Result.command("")
        self.db.policy.check(parsed)
        result = self.execution.run_sql(sql, params, parsed)
        if parsed.type == st.T.PREPARE and (parts := st.prepared_parts(parsed)):
            self._prepared[parts[0]] = parts[1]
        if parsed.writes:
            self.tx.wrote(sql, params)
        return result

    def _parse_one(self, sql: str) -> st.Parsed | None:
        """DuckDB's reading of one statement; an ``EXECUTE`` takes its prepared statement's kind."""
        parsed = st.parse(sql)
        if len(parsed) > 1:
            raise duckdb.ParserException(
                "cannot insert multiple commands into a prepared statement"
            )
        if not parsed:
            return None
        one = parsed[0]
        if one.type == st.T.EXECUTE and (inner := self._prepared.get(one.name() or "")):
            return st.Parsed(one.sql, inner.type, one.text, inner.returning)
        return one

    def _describe_sql(self, sql: str, count: int) -> list[m.Field]:
        """Fields of a statement that only reads (writes, EXECUTE: described when executed)."""
        if cmd.parse_command(sql) is not None:
            return []
        parsed = st.parse(sql)
        if len(parsed) != 1 or parsed[0].writes or parsed[0].type not in st.DESCRIBABLE:
            return []
        return self.execution.describe_sql(sql, count)

    def _replay(self, write: Write) -> None:
        sql, params = write
        parsed = self._parse_one(sql)
        if parsed is not None:
            result = self.execution.run_sql(sql, params, parsed)
            with self.execution.busy():
                self.execution.translated(lambda: result.take(None))
            self.execution.close_open()

    def _restart(self) -> None:
        with contextlib.suppress(duckdb.Error):  # a cancel may have replaced the connection
            self.con.execute("ROLLBACK")
        self.con.execute("BEGIN TRANSACTION")

    def _command(self, command: cmd.Command, params: list[Any]) -> Result:
        if isinstance(command, cmd.Set | cmd.Reset | cmd.Show):
            return run_setting(self.settings, command)
        if isinstance(command, cmd.Begin):
            if self.status == b"I":
                self.con.execute("BEGIN TRANSACTION")
                self.tx.begin()
            return Result.command("BEGIN")
        if isinstance(command, cmd.End):
            if self.status == b"I":
                return Result.command("COMMIT" if command.commit else "ROLLBACK")
            tag = "COMMIT" if command.commit and self.status == b"T" else "ROLLBACK"
            self.tx.end()
            if tag == "COMMIT":
                self.con.execute("COMMIT")
            else:
                with contextlib.suppress(duckdb.Error):
                    self.con.execute("ROLLBACK")
            return Result.command(tag)
        if isinstance(command, cmd.Savepoint):
            self.tx.savepoint(command.name)
            return Result.command("SAVEPOINT")
        if isinstance(command, cmd.Release):
            self.tx.release(command.name)
            return Result.command("RELEASE")
        if isinstance(command, cmd.RollbackToSavepoint):
            self.tx.rollback_to(command.name, self._restart, self._replay)
            return Result.command("ROLLBACK")
        if isinstance(command, cmd.Deallocate):
            everything = {*self._statements, *self._prepared}
            for name in everything if command.name is None else {command.name}:
                self._statements.pop(name, None)
                if self._prepared.pop(name, None) is not None:
                    self.con.execute('DEALLOCATE "' + name.replace('"', '""') + '"')
            return Result.command("DEALLOCATE ALL" if command.name is None else "DEALLOCATE")
        if isinstance(command, cmd.CopyOut):
            fmt = copy_format(command.options)
            result = self.run_statement(command.query, params)
            result.copy, result.tag_word = fmt, "COPY"
            return result
        if isinstance(command, cmd.CopyIn):
            raise PlanError(
                "COPY ... FROM STDIN is not supported by this server: use INSERT ... VALUES "
                "(psycopg executemany) instead"
            )
        if isinstance(command, cmd.Declare):
            # Materialised, so the session can run other statements while the cursor is open.
            result = self.run_statement(command.query, params)
            with self.execution.busy():
                batches = list(self.execution.translated(lambda: list(result.batches or ())))
            self.execution.close_open()
            result.batches = iter(batches)
            self._portals[command.name] = Portal(Statement(command.query, []), [], [0], result)
            return Result.command("DECLARE CURSOR")
        if isinstance(command, cmd.Fetch):
            portal = self._portal(command.name)
            source = self._result(portal)
            if command.move:
                with self.execution.busy():
                    moved = self.execution.translated(lambda: source.skip(command.count))
                return Result.command(f"MOVE {moved}")
            with self.execution.busy():
                rows, _ = self.execution.translated(lambda: source.take(command.count))
            fetched = Result("FETCH", source.fields, source.types, iter(()))
            fetched.preload(rows)
            return fetched
        if isinstance(command, cmd.Close):
            if command.name.lower() == "all":
                self._portals = {k: v for k, v in self._portals.items() if k == ""}
            else:
                self._portal(command.name)
                self._portals.pop(command.name, None)
            return Result.command("CLOSE CURSOR")
        assert isinstance(command, cmd.Ignore)
        return Result.command(command.tag)

    # -- cancellation ------------------------------------------------------------------------
    def cancel(self) -> None:
        """Stop the running statement (from the thread that received a CancelRequest)."""
        self.execution.cancel()
