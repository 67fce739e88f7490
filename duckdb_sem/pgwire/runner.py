"""What a session runs: statements through DuckDB, and the commands the server answers itself.

:class:`Runner` holds a session's state apart from the protocol: its connection
(:class:`~duckdb_sem.pgwire.execution.Execution`), session variables (:mod:`.settings`), the
transaction and its savepoints (:mod:`.transaction`), prepared statements and portals
(:mod:`.portals`, sharing one namespace with ``DECLARE``d cursors, as in PostgreSQL, so a client
may ``Describe`` a declared cursor). A statement is a session command
(:func:`~duckdb_sem.pgwire.commands.parse_command`) or else read by DuckDB's parser
(:mod:`.statements`), checked by the isolation rules (:mod:`.policy`) and run. The model
statements (``SHOW MODELS``, ``CREATE``/``DROP MODEL``: :mod:`duckdb_sem.surface.model_statements`)
are read first; the server's models are every session's, so only a server started with
``--external-access`` lets a client change them (others set ``DUCKDB_SEM_MODELS``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import duckdb
import pyarrow as pa

from duckdb_sem.errors import PlanError, RefusedError, SemError, UndefinedNameError
from duckdb_sem.pgwire import commands as cmd
from duckdb_sem.pgwire import messages as m
from duckdb_sem.pgwire import statements as st
from duckdb_sem.pgwire.array_literals import bind_array_params
from duckdb_sem.pgwire.catalog import rewrite_catalog
from duckdb_sem.pgwire.catalog_macros import settings_macro
from duckdb_sem.pgwire.copy_out import copy_format
from duckdb_sem.pgwire.database import Database
from duckdb_sem.pgwire.execution import Execution
from duckdb_sem.pgwire.limits import Limiter, OperatorLimits, SessionLimits
from duckdb_sem.pgwire.portals import Portal, Statement
from duckdb_sem.pgwire.prepare import typed_prepare
from duckdb_sem.pgwire.results import Result
from duckdb_sem.pgwire.settings import run_setting
from duckdb_sem.pgwire.startup import check_setting_name
from duckdb_sem.pgwire.timezone import SERVER_ZONE, resolve_zone
from duckdb_sem.pgwire.transaction import SEQUENCE_CALL, Transaction, Write, replay_hazard
from duckdb_sem.runtime.budget import SETTINGS as BUDGET_SETTINGS
from duckdb_sem.session.connection import SemConnection
from duckdb_sem.surface.model_statements import ModelStatement, parse_model_statement

__all__ = ["TRANSACTION_COMMANDS", "Runner"]

#: commands that control the transaction (a simple Query with one runs no implicit transaction)
TRANSACTION_COMMANDS = (cmd.Begin, cmd.End, cmd.Savepoint, cmd.Release, cmd.RollbackToSavepoint)


_EXPLAIN_SCHEMA = pa.schema([pa.field("plan", pa.string())])


class _TxAborted(SemError):
    sqlstate = "25P02"  # in_failed_sql_transaction


class Runner:
    def __init__(
        self,
        db: Database,
        *,
        application_name: str = "",
        guard: Callable[[], AbstractContextManager[None]] | None = None,
        limits: SessionLimits | None = None,
    ) -> None:
        self.db = db
        self.execution = Execution(db, guard=guard)
        self.settings = dict(cmd.SESSION_DEFAULTS)
        self.settings["application_name"] = application_name
        #: the session's budget under the server's operator limits (kept across reconnects)
        self.limits = limits or SessionLimits(Limiter(OperatorLimits(), db.settings))
        self._zone = SERVER_ZONE  # the IANA name of the session's zone, as DuckDB has it
        self._bound: SemConnection | None = None
        self._bind()
        self.tx = Transaction()
        self.statements: dict[str, Statement] = {}
        self.portals: dict[str, Portal] = {}
        #: statements of SQL-level PREPARE, so EXECUTE returns what they return
        self.prepared: dict[str, st.Parsed] = {}

    @property
    def status(self) -> bytes:
        return self.tx.status

    @property
    def con(self) -> SemConnection:
        """The session's connection (replaced after a cancelled statement)."""
        return self.execution.con

    def _bind(self) -> None:
        """Put the session's budget and time zone on its connection (a new one after a cancel)."""
        if self.con is not self._bound:
            self.limits.bind(self.con)  # a cursor starts in the machine's zone: set the session's
            self.con.duckdb.execute("SET TimeZone = $1", [self._zone])
            self._bound = self.con

    def apply_startup(self, settings: list[tuple[str, str]]) -> None:
        """The startup packet's settings (:mod:`.startup`), each as ``SET`` would apply it."""
        for name, value in settings:
            self._command(cmd.Set(name, value), [])

    def reported(self) -> dict[str, str]:
        """The settings PostgreSQL reports to the client (ParameterStatus) when they change."""
        return {
            "TimeZone": self.settings["timezone"],
            "application_name": self.settings["application_name"],
        }

    def portal(self, name: str) -> Portal:
        portal = self.portals.get(name)
        if portal is None:
            raise UndefinedNameError(
                f'portal "{name}" does not exist (a portal ends with its transaction: outside '
                "BEGIN ... COMMIT, at Sync)"
            )
        return portal

    def result(self, portal: Portal) -> Result:
        if portal.result is None:
            if not portal.statement.sql.strip():
                portal.result = Result.command("")
            else:
                portal.result = self.run_statement(portal.statement.sql, portal.params)
            portal.result.formats = portal.formats or [0]
        return portal.result

    def run_statement(self, sql: str, params: list[Any]) -> Result:
        self.execution.park_open()  # the statement may use the connection (see park_open)
        self._bind()  # after: binding a new connection runs a SET on it
        command = cmd.parse_command(sql)
        if self.status == b"E" and not isinstance(command, cmd.End | cmd.RollbackToSavepoint):
            raise _TxAborted(
                "current transaction is aborted, commands ignored until end of transaction block"
            )
        if command is not None:
            return self._command(command, params)
        sql = typed_prepare(sql)
        model = parse_model_statement(sql)
        if model is not None:
            if model.verb != "show":
                return self._model_change(model)
            sql, params = self.con.models_sql(), []
        parsed = self._parse_one(sql)
        if parsed is None:
            return Result.command("")
        self.db.policy.check(parsed)
        params = bind_array_params(sql, params)  # psycopg: a list of str as = ANY(%s)
        # an autocommit write commits: counted, so no savepoint replays across it
        announce = parsed.writes and self.status == b"I"
        result = self.execution.run_sql(sql, params, parsed, announce=announce)
        if parsed.type == st.T.PREPARE and (parts := st.prepared_parts(parsed)):
            self.prepared[parts[0]] = parts[1]
        if parsed.writes or SEQUENCE_CALL.search(sql):
            self.tx.wrote(self._logged(sql, params, result))
        return result

    def _logged(self, sql: str, params: list[Any], result: Result) -> Write:
        """The log entry of a write in a block (its tag, what would make a replay differ)."""
        hazard = replay_hazard(
            sql,
            sources=[s.alias for s in self.db.sources],
            cache=self.db.settings.cache_path is not None,
        )
        tag = None if result.has_rows else result.tag()
        return Write(sql, list(params), tag, hazard)

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
        if one.type == st.T.EXECUTE and (inner := self.prepared.get(one.name() or "")):
            return st.Parsed(one.sql, inner.type, one.text, inner.returning)
        return one

    def describe_sql(self, sql: str, count: int) -> list[m.Field]:
        """Fields of a statement that only reads (writes, EXECUTE: described when executed)."""
        command = cmd.parse_command(sql)
        if isinstance(command, cmd.ExplainSemantic):
            return Result.of_rows("EXPLAIN", _EXPLAIN_SCHEMA, iter(())).described()
        if command is not None:
            return []
        model = parse_model_statement(sql)
        if model is not None:
            return (
                []
                if model.verb != "show"
                else self.execution.describe_sql(self.con.models_sql(), 0)
            )
        parsed = st.parse(sql)
        if len(parsed) != 1 or parsed[0].writes or parsed[0].type not in st.DESCRIBABLE:
            return []
        return self.execution.describe_sql(sql, count)

    def _explain_semantic(self, command: cmd.ExplainSemantic) -> Result:
        """The plan text as rows of one ``plan`` column, as ``con.sql("EXPLAIN SEMANTIC ...")``
        returns it in-process; the explained statement passes the session's policy first."""
        for parsed in st.parse(command.query):
            self.db.policy.check(parsed)
        with self.execution.busy():
            text = self.execution.translated(
                lambda: self.con.explain_semantic(
                    self.db.rewrite(rewrite_catalog(command.query), self.con),
                    analyze=command.analyze,
                    verbose=command.verbose,
                )
            )
        lines = pa.array(text.splitlines(), pa.string())
        batch = pa.RecordBatch.from_arrays([lines], schema=_EXPLAIN_SCHEMA)
        result = Result.of_rows("EXPLAIN", _EXPLAIN_SCHEMA, iter([batch]))
        result.fixed_tag = "EXPLAIN"
        return result

    def _model_change(self, model: ModelStatement) -> Result:
        """``CREATE``/``DROP MODEL``: the server's models, which every session shares."""
        if not self.db.policy.external_access:
            raise RefusedError(
                "models are shared by every session and reach files or servers: register them "
                "when starting the server (DUCKDB_SEM_MODELS=name=spec;...), or start it with "
                "--external-access"
            )
        self.con.model_statement(model)
        return Result.command(model.tag)

    def _replay(self, write: Write) -> str | None:
        """Run a logged write again; its tag (None for one that returns rows)."""
        parsed = self._parse_one(write.sql)
        if parsed is None:
            return None
        result = self.execution.run_sql(write.sql, write.params, parsed)
        with self.execution.busy():
            self.execution.translated(lambda: result.take(None))
        self.execution.close_open()
        return None if result.has_rows else result.tag()

    def _restart(self) -> None:
        with contextlib.suppress(duckdb.Error):  # a cancel may have replaced the connection
            self.con.execute("ROLLBACK")
        self.con.execute("BEGIN TRANSACTION")

    def _setting_value(self, name: str) -> str | None:
        """A setting's value as SET would give it back (None: never set, RESET restores it)."""
        if name.startswith("duckdb_sem."):
            return self.con.option_value(name.removeprefix("duckdb_sem."))
        return self.settings.get(name)

    def _restore(self, settings: dict[str, str | None]) -> None:
        """Put back the settings a transaction changed (see ``Transaction.end``)."""
        for name, value in settings.items():
            self._command(cmd.Reset(name) if value is None else cmd.Set(name, value), [])

    def _command(self, command: cmd.Command, params: list[Any]) -> Result:
        if isinstance(command, cmd.Set) and command.local and self.status == b"I":
            result = Result.command("SET")  # as PostgreSQL: a warning, and nothing changes
            result.notices.append("SET LOCAL can only be used in transaction blocks")
            return result
        if isinstance(command, cmd.Set | cmd.Reset) and command.name != "all":
            local = isinstance(command, cmd.Set) and command.local
            self.tx.setting_changed(command.name, self._setting_value(command.name), local=local)
        if isinstance(command, cmd.Set | cmd.Reset) and command.name.startswith("duckdb_sem."):
            # the connection's own settings (budgets, approximation): applied there, shown by
            # SHOW as well
            option = command.name.removeprefix("duckdb_sem.")
            value = command.value if isinstance(command, cmd.Set) else None
            self.limits.set(self.con, option, value)  # within the operator's caps
            self.settings[command.name] = self.con.option_value(option)
            return Result.command("SET" if isinstance(command, cmd.Set) else "RESET")
        if isinstance(command, cmd.Show) and command.name.startswith("duckdb_sem."):
            # as the connection has it, SET or not
            self.settings[command.name] = self.con.option_value(
                command.name.removeprefix("duckdb_sem.")
            )
        # the TimeZone is DuckDB's cursor's too: it reads and renders timestamptz in it
        if isinstance(command, cmd.Set) and command.name == "timezone":
            zone = resolve_zone(command.value)
            self.con.duckdb.execute("SET TimeZone = $1", [zone.iana])
            command, self._zone = cmd.Set("timezone", zone.shown), zone.iana
        elif isinstance(command, cmd.Reset) and command.name in {"timezone", "all"}:
            self.con.duckdb.execute("SET TimeZone = $1", [SERVER_ZONE])
            self._zone = SERVER_ZONE
            if command.name == "all":  # the budgets go back to the server's defaults too
                for name in BUDGET_SETTINGS:
                    self.limits.set(self.con, name, None)
        if isinstance(command, cmd.Set) and command.name in _ISOLATION_NAMES:
            level = " ".join(command.value.lower().split())
            return _isolation_notice(Result.command("SET"), level)  # SHOW: the level given
        if isinstance(command, cmd.Set | cmd.Reset):
            if command.name != "all":
                check_setting_name(command.name)  # as PostgreSQL: 42704 for an unknown name
            result = run_setting(self.settings, command)
            self.con.execute(settings_macro(self.settings))  # current_setting() sees it too
            return result
        if isinstance(command, cmd.Show):
            return run_setting(self.settings, command)
        if isinstance(command, cmd.Begin):
            if self.status == b"I":
                mark = self.db.commits.mark()  # before DuckDB's snapshot is taken
                self.con.execute("BEGIN TRANSACTION")
                self.tx.begin(mark)
            return _isolation_notice(Result.command(command.tag), command.isolation)
        if isinstance(command, cmd.SetTransaction):
            return _isolation_notice(Result.command("SET"), command.isolation)
        if isinstance(command, cmd.End):
            if self.status == b"I":
                return Result.command("COMMIT" if command.commit else "ROLLBACK")
            tag = "COMMIT" if command.commit and self.status == b"T" else "ROLLBACK"
            dirty, undo = self.tx.dirty, dict(self.tx.settings_before)
            restore = self.tx.end(committed=tag == "COMMIT")
            try:
                if tag == "COMMIT" and dirty:
                    with self.db.commits.committing():  # other sessions' savepoints see it
                        self.con.execute("COMMIT")
                elif tag == "COMMIT":
                    self.con.execute("COMMIT")
                else:
                    with contextlib.suppress(duckdb.Error):
                        self.con.execute("ROLLBACK")
            except duckdb.Error:
                self._restore(undo)  # it rolled back: every SET undone
                raise
            self._restore(restore)
            return Result.command(tag)
        if isinstance(command, cmd.Savepoint):
            self.tx.savepoint(command.name)
            return Result.command("SAVEPOINT")
        if isinstance(command, cmd.Release):
            self.tx.release(command.name)
            return Result.command("RELEASE")
        if isinstance(command, cmd.RollbackToSavepoint):
            self.tx.rollback_to(
                command.name, self._restart, self._replay, self.db.commits.unchanged_since
            )
            return Result.command("ROLLBACK")
        if isinstance(command, cmd.Deallocate):
            everything = {*self.statements, *self.prepared}
            for name in everything if command.name is None else {command.name}:
                self.statements.pop(name, None)
                if self.prepared.pop(name, None) is not None:
                    self.con.execute('DEALLOCATE "' + name.replace('"', '""') + '"')
            return Result.command("DEALLOCATE ALL" if command.name is None else "DEALLOCATE")
        if isinstance(command, cmd.CopyOut):
            fmt = copy_format(command.options)
            result = self.run_statement(command.query, params)
            result.copy, result.tag_word = fmt, "COPY"
            return result
        if isinstance(command, cmd.ExplainSemantic):
            return self._explain_semantic(command)
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
            self.portals[command.name] = Portal(Statement(command.query, []), [], [0], result)
            return Result.command("DECLARE CURSOR")
        if isinstance(command, cmd.Fetch):
            portal = self.portal(command.name)
            source = self.result(portal)
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
                self.portals = {k: v for k, v in self.portals.items() if k == ""}
            else:
                self.portal(command.name)
                self.portals.pop(command.name, None)
            return Result.command("CLOSE CURSOR")
        assert isinstance(command, cmd.Ignore)
        return Result.command(command.tag)


_ISOLATION_NAMES = {"transaction_isolation", "default_transaction_isolation"}


def _isolation_notice(result: Result, level: str) -> Result:
    """``result`` with a NOTICE when the isolation asked for is not the one DuckDB gives."""
    if level == "serializable":
        result.notices.append(
            "SERIALIZABLE is run as REPEATABLE READ: DuckDB gives every transaction snapshot "
            "isolation, where a concurrent write to the same row fails with 40001 but write "
            "skew (two transactions each reading what the other writes) is not detected; "
            "SHOW transaction_isolation reports repeatable read. Where the invariant spans "
            "rows, write a row both transactions change (a lock row), or check it after "
            "COMMIT (docs/pgwire.md, Isolation)"
        )
    elif level and level != cmd.ISOLATION:
        result.notices.append(
            f"{level.upper()} is run as REPEATABLE READ: DuckDB gives every transaction one "
            "snapshot, and a write to a row another transaction changed since fails with "
            "40001 (retry the transaction) instead of reading the new row"
        )
    return result
