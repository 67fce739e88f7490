"""``SemConnection``: a DuckDB connection that understands semantic SQL.

It is used like ``duckdb.DuckDBPyConnection`` (``sql``, ``execute``, ``fetchall``, ``arrow``,
``df``; anything else is passed through), and adds ``stats()``, ``explain_semantic()``, the
named ``models`` (``CREATE MODEL``, ``DROP MODEL``, ``SHOW MODELS``) and an ``interrupt()``
that also stops the query's queued LLM work. Before DuckDB sees a statement with
a semantic call, ``{column}`` templates are bound (errors here cost no LLM call); DuckDB then runs
it, calling the ``sem_*`` UDFs batch by batch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
import time
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import duckdb
import pyarrow as pa

from duckdb_sem.config import Settings
from duckdb_sem.errors import BindError, ConfigError, PlanError, QueryCancelledError, SemError
from duckdb_sem.runtime.approximation import SETTINGS as APPROXIMATION_SETTINGS
from duckdb_sem.runtime.approximation import Approximation, approximation_of
from duckdb_sem.runtime.budget import PER_SESSION, Budget
from duckdb_sem.runtime.budget import SETTINGS as BUDGET_SETTINGS
from duckdb_sem.runtime.context import Progress, QueryStats
from duckdb_sem.runtime.dry_run import DryRun
from duckdb_sem.runtime.entry import Prepared, options_from_settings, prepare, run_prepared
from duckdb_sem.runtime.progress import QueryProgress, RuntimeOptions
from duckdb_sem.scheduler.models import DEFAULT_MODEL, Models
from duckdb_sem.session import factory
from duckdb_sem.session.caller_scope import call_in_caller_scope
from duckdb_sem.session.explain import explain_semantic
from duckdb_sem.session.prepared import PreparedTexts
from duckdb_sem.session.relation import SemRelation
from duckdb_sem.session.result import PlannedStream
from duckdb_sem.session.run import count_table, open_rows, write_rows
from duckdb_sem.session.sources import SourceRegistry, Statement
from duckdb_sem.session.statements import Planned, Route, Router
from duckdb_sem.session.transaction import (
    StatementTransaction,
    abort_user_transaction,
    settle,
)
from duckdb_sem.surface.aliases import normalize_aliases
from duckdb_sem.surface.bind import has_semantic_call
from duckdb_sem.surface.model_statements import ModelStatement, parse_model_statement
from duckdb_sem.surface.params import number_placeholders
from duckdb_sem.surface.udfs import SemSession

__all__ = ["SemConnection", "SemRelation"]

log = logging.getLogger(__name__)

_SETTING = re.compile(
    r"^\s*(?P<verb>SET|RESET|SHOW)\s+(?:SESSION\s+)?duckdb_sem\.(?P<name>\w+)"
    r"(?:\s*(?:=|\s+TO\s+)\s*(?P<value>[^;]+?))?\s*;?\s*$",
    re.IGNORECASE,
)
_EXPLAIN = re.compile(r"^\s*EXPLAIN\s+(ANALYZE\s+)?SEMANTIC\s+(VERBOSE\s+)?", re.IGNORECASE)


#: statements a dry run may execute (in a transaction it rolls back); the others act outside
#: the database (COPY writes a file, ATTACH opens one, SET changes the session, ...)
_DRY_RUNNABLE = re.compile(
    r"^\s*(\(|SELECT|WITH|FROM|VALUES|TABLE|INSERT|UPDATE|DELETE|CREATE\s+(OR\s+REPLACE\s+)?"
    r"(TEMP\s+|TEMPORARY\s+)?(TABLE|VIEW))\b",
    re.IGNORECASE,
)


def _not_dry_runnable(sql: str) -> str | None:
    """Why ``sql`` is not dry-run, or None when it may be."""
    if _DRY_RUNNABLE.match(sql):
        return None
    verb = (sql.split() or ["(empty)"])[0].upper()
    hint = "; EXPLAIN SEMANTIC the query inside it" if verb == "COPY" else ""
    return f"{verb} statements act outside the database, so they are not dry-run{hint}"


def _numbered(sql: str, params: Sequence[Any] | None) -> str:
    """``?`` placeholders written ``$1``, ``$2``... (same meaning for DuckDB), so parameters
    can be inlined by number into the one AST of the statement."""
    return number_placeholders(sql) if params and has_semantic_call(sql) else sql


class SemConnection:
    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        session: SemSession,
        settings: Settings,
        *,
        optimize: bool = True,
    ) -> None:
        self._con = con
        self.session = session
        self.settings = settings
        #: plan semantic SELECTs with the optimizer (False: always the UDF path, as written)
        self.optimize = optimize
        self.on_progress: Callable[[Progress], None] | None = None
        #: how planned queries run: the adaptive SEU loop, or a baseline (None: from settings)
        self.runtime: RuntimeOptions | None = None
        #: the planned result ``execute`` left for fetch*, and the last planned stream opened
        #: (by ``execute`` or a relation's fetch); both closed when the next statement starts
        self._pending: PlannedStream | None = None
        self._open: PlannedStream | None = None
        self._raw_pending = False  # an ``execute`` on the UDF path left DuckDB a result
        #: limits of each query's backend work (``runtime.budget``); ``SET duckdb_sem.*`` too
        self.budget = Budget.from_settings(settings)  # its session count: cursors share it
        #: lossy plans allowed, and their targets (``runtime.approximation``); ``SET`` too
        self.approximation = approximation_of(settings)
        self._sources = SourceRegistry(self)  # caller-scope DataFrames, table functions
        self._router = Router(con, check_model=self.models.check,
                              ensure_typed_map=session.ensure_typed_map)  # fmt: skip
        self._sql_prepared = PreparedTexts(self._router.is_semantic)  # SQL PREPARE of sem_* SQL
        # routes of statements not yet fetched, so a fetch need not plan them again;
        # forgotten whenever a statement that is not a planned query runs (it may be DDL)
        self._plans: OrderedDict[str, Route] = OrderedDict()
        #: what each planned SELECT's last run prepared (plans, ranking, profile) and DuckDB's
        #: names and types of its columns, reused by a repeat of the same route
        self._prepared: dict[
            str, tuple[Prepared, list[str] | None, list[str] | None, tuple[object, ...]]
        ] = {}
        #: the statement object (its registrations) of each planned statement not yet fetched
        self._statements: weakref.WeakValueDictionary[str, Statement] = (
            weakref.WeakValueDictionary()
        )

    # -- DuckDB-compatible surface --------------------------------------------------------
    def sql(
        self,
        query: str,
        *,
        alias: str = "",
        params: Sequence[Any] | None = None,
        tree: Any = None,
    ) -> SemRelation:
        """Like ``DuckDBPyConnection.sql``: a lazy relation; LLM work happens when fetched
        (a write statement runs now, as in DuckDB). ``tree``: the sqlglot AST of ``query``
        when the caller parsed it already (the wire server's Postgres pushdown), so the
        statement is not parsed again. A statement DuckDB runs alone goes to it from the
        caller's scope (:mod:`.caller_scope`), so its variables are found as DuckDB finds them.
        A write that fails aborts the transaction it ran in, as DuckDB's ``sql`` does (a query
        that fails to bind does not)."""
        self.discard_results()
        try:
            return self._sql(query, alias=alias, params=params, tree=tree)
        except SemError as err:
            if _writes(query):
                abort_user_transaction(self._con, err)
            raise

    def _sql(
        self, query: str, *, alias: str, params: Sequence[Any] | None, tree: Any
    ) -> SemRelation:
        if (run := self._sql_prepared.expand(query, self._arguments)) is not None:
            query, params, tree = run[0], run[1], None  # EXECUTE of a semantic PREPARE
        query = self._sql_prepared.note(query)
        written = query
        query = normalize_aliases(query, models=self.models.names())
        explained = self._maybe_explain(query)
        if explained is not None:
            return SemRelation(self._con.sql("SELECT unnest($1) AS plan", params=[explained]), self)
        setting = self._maybe_setting(query)
        if setting is not None:
            return SemRelation(self._con.sql(setting), self)
        model = parse_model_statement(query)
        if model is not None:
            return SemRelation(self._con.sql(self.model_statement(model)), self)
        numbered = _numbered(query, params)
        reuse = tree is not None and numbered == written  # the AST is of this very text
        semantic = self._router.is_semantic(numbered)
        statement = self._sources.open(numbered, tree=tree if reuse else None, caller=semantic)
        route = self.route(statement, params)
        if route.planned is not None and route.write is not None:
            stream = self.stream_planned(route.statement, route=route)  # writes run now
            return SemRelation(stream.relation(), self, keep=statement)
        if route.planned is not None:
            # Nothing runs yet: each fetch runs the plan on the SEU loop (a LIMIT stops it).
            self._statements[route.statement] = statement
            self._sources.set_aside(statement)  # registered again while it runs
            return SemRelation(None, self, planned=route.statement, keep=statement)
        self._sources.release_caller(statement)
        rel = self.translating(call_in_caller_scope)(
            self._con.sql, route.sql, scan=route.sql, params=params, alias=alias
        )
        if rel is None:  # DuckDB's answer to a statement of only whitespace, ';' or comments
            raise BindError(f"nothing to run: the statement {query!r} is empty")
        return SemRelation(rel, self, keep=statement)

    query = sql
    from_query = sql

    def _arguments(self, args: str) -> Sequence[Any]:
        """The values of an ``EXECUTE``'s argument list."""
        rows = self.translating(self._con.sql)(f"SELECT {args}").fetchall()
        return tuple(rows[0]) if rows else ()

    def execute(
        self, query: str | duckdb.Statement, parameters: Sequence[Any] | None = None
    ) -> SemConnection:
        """Like ``DuckDBPyConnection.execute``: the statement runs, its result waits for
        ``fetch*`` (a result not read to its end is discarded by the next statement). A
        statement that fails aborts the transaction it ran in, as DuckDB's ``execute`` does
        (binding and settings errors included)."""
        self.discard_results()
        try:
            return self._execute(query, parameters)
        except SemError as err:  # DuckDB aborted the transaction for its own errors already
            abort_user_transaction(self._con, err)
            raise

    def _execute(
        self, query: str | duckdb.Statement, parameters: Sequence[Any] | None
    ) -> SemConnection:
        if isinstance(query, duckdb.Statement):  # from duckdb.extract_statements
            if not self._router.is_semantic(query.query):  # DuckDB's own, as it is
                run = self.translating(call_in_caller_scope)
                run(self._con.execute, query, parameters, scan=query.query)
                self._raw_pending = True
                return self
            query = query.query
        if (expanded := self._sql_prepared.expand(query, self._arguments)) is not None:
            query, parameters = expanded  # EXECUTE of a semantic PREPARE: its statement
        query = self._sql_prepared.note(query)
        query = normalize_aliases(query, models=self.models.names())
        explained = self._maybe_explain(query)
        if explained is not None:
            self._con.execute("SELECT unnest($1) AS plan", [explained])
            self._raw_pending = True
            return self
        setting = self._maybe_setting(query)
        if setting is not None:
            self._con.execute(setting)
            self._raw_pending = True
            return self
        model = parse_model_statement(query)
        if model is not None:
            self._con.execute(self.model_statement(model))
            self._raw_pending = True
            return self
        numbered = _numbered(query, parameters)
        statement = self._sources.open(
            numbered, pin=True, caller=self._router.is_semantic(numbered)
        )
        route = self.route(statement, parameters)
        if route.planned is not None:
            self._pending = self.stream_planned(route.statement, route=route)
            return self
        self._sources.release_caller(statement)
        run = self.translating(call_in_caller_scope)
        run(self._con.execute, route.sql, parameters, scan=route.sql)
        self._raw_pending = True
        return self

    def fetchall(self) -> list[tuple[Any, ...]]:
        if self._pending is not None:
            return self.translating(self._pending.fetchall)()  # type: ignore[no-any-return]
        rows: list[tuple[Any, ...]] = self.translating(self._con.fetchall)()
        return rows

    def fetchone(self) -> tuple[Any, ...] | None:
        if self._pending is not None:
            return self.translating(self._pending.fetchone)()  # type: ignore[no-any-return]
        row: tuple[Any, ...] | None = self.translating(self._con.fetchone)()
        return row

    def fetchmany(self, size: int = 1) -> list[tuple[Any, ...]]:
        if self._pending is not None:
            return self.translating(self._pending.fetchmany)(size)  # type: ignore[no-any-return]
        rows: list[tuple[Any, ...]] = self.translating(self._con.fetchmany)(size)
        return rows

    def arrow(self) -> Any:
        """The pending result as a ``pyarrow.Table``.

        DuckDB 2 warns that Arrow from a DB-API result copies the rows; that copy is what this
        DB-API-style call means, so the warning is silenced here. ``con.sql(q).arrow()`` avoids it.
        """
        if self._pending is not None:
            return self.translating(self._pending.arrow)()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Arrow output on a DB-API result")
            return self.translating(self._con.to_arrow_table)()

    def to_arrow_table(self) -> Any:
        return self.arrow()

    def to_arrow_reader(self, batch_size: int = 1_000_000) -> Any:
        if self._pending is not None:
            return self._pending.reader
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Arrow output on a DB-API result")
            return self.translating(self._con.to_arrow_reader)(batch_size)

    def df(self, *, date_as_object: bool = False) -> Any:
        if self._pending is not None:  # DuckDB's conversion
            return self.translating(self._pending.relation)().df(date_as_object=date_as_object)
        return self.translating(self._con.df)(date_as_object=date_as_object)

    fetchdf = fetch_df = df

    def table(self, name: str) -> SemRelation:
        """A table, view or caller-scope DataFrame as a relation with ``sem_*`` methods."""
        return self.translating(SemRelation.of_table)(self, name)  # type: ignore[no-any-return]

    def from_df(self, df: Any) -> SemRelation:
        return SemRelation.of_relation(self, self.translating(self._con.from_df)(df), alias="df")

    def from_arrow(self, table: Any) -> SemRelation:
        rel = self.translating(self._con.from_arrow)(table)
        return SemRelation.of_relation(self, rel, alias="df")

    def register(self, name: str, obj: Any) -> SemConnection:
        """DuckDB's ``register``; a ``SemRelation`` is registered as its DuckDB relation."""
        self._con.register(name, obj.relation if isinstance(obj, SemRelation) else obj)
        return self

    @property
    def description(self) -> Any:
        if self._pending is not None:
            return self._pending.description
        return self._con.description

    @property
    def duckdb(self) -> duckdb.DuckDBPyConnection:
        """The underlying DuckDB connection (semantic functions installed, no SQL rewriting)."""
        return self._con

    def cursor(self) -> SemConnection:
        """A new connection to the same database with the semantic functions: its own session
        (query context, UDF names) on this connection's engine, scheduler and cache."""
        raw = self._con.cursor()
        engine = factory.shared_engine(self.session.engine, self.settings)
        child = SemConnection(raw, factory.attach(raw, engine, owned=True), self.settings,
                              optimize=self.optimize)  # fmt: skip
        child.runtime = self.runtime
        child.approximation = self.approximation
        child.budget = self.budget  # a SET holds in the cursor too; one session count
        return child

    def run_to_end(self, query: str) -> None:
        """Run ``query`` and read every row of its result, keeping none (all its LLM work is
        done): what ``EXPLAIN ANALYZE SEMANTIC`` and a dry run do with a statement."""
        self.execute(query)
        try:
            while self.fetchmany(2048):  # a planned result runs its SEUs as it is read
                pass
        except SemError:
            raise
        except duckdb.Error:  # a statement without a result
            pass

    def dry_run(self, query: str) -> DryRun:
        """Run ``query`` once on a dry twin of this connection: same database and SQL road,
        every model (default and named) a counting :class:`~duckdb_sem.runtime.dry_run.
        DryBackend`, no cache, no estimator, lossless plans, inside a transaction that is
        rolled back. What ``EXPLAIN SEMANTIC`` reports for a statement off the optimizer."""
        refused = _not_dry_runnable(query)
        if refused is not None:
            return DryRun({}, 0.0, refused)
        engine, counters = factory.dry_engine(self.session.engine, self.settings)
        raw = self._con.cursor()
        twin = SemConnection(raw, factory.attach(raw, engine, owned=True),
                             factory.dry_settings(self.settings),
                             optimize=self.optimize)  # fmt: skip
        twin.runtime = dataclasses.replace(self.runtime_options(), estimator=None,
                                           estimator_client=None, helper_client=None)  # fmt: skip
        twin.approximation = Approximation()  # lossless plans only
        started = time.perf_counter()
        try:
            raw.execute("BEGIN TRANSACTION")
            try:
                twin.run_to_end(query)
            finally:
                raw.execute("ROLLBACK")
        except (duckdb.Error, SemError) as err:
            hint = ""
            if isinstance(err, duckdb.CatalogException) or "Catalog Error" in str(err):
                hint = ("; a dry run reads through a second connection to the database, which "
                        "cannot see this connection's TEMP tables or registered DataFrames")  # fmt: skip
            return DryRun({}, time.perf_counter() - started, f"the dry run failed: {err}{hint}")
        finally:
            twin.close()
        spend = {None if n == DEFAULT_MODEL else n: c.spend() for n, c in counters.items()}
        return DryRun(spend, time.perf_counter() - started)

    def __getattr__(self, name: str) -> Any:
        """DuckDB's own methods; those that return a relation (``read_csv``, ``read_parquet``,
        ``read_json``, ``values``, ``from_query``, ...) return a semantic-capable one."""
        attr = getattr(self._con, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            scan = args[0] if args and isinstance(args[0], str) else None  # SQL it may run
            value = self.translating(call_in_caller_scope)(attr, *args, scan=scan, **kwargs)
            if isinstance(value, duckdb.DuckDBPyRelation):
                return SemRelation(value, self)
            return value

        return call

    # -- duckdb-sem additions ---------------------------------------------------------------
    @property
    def models(self) -> Models:
        """The named models calls choose with ``model :=`` (``default``: this connection's
        backend); ``models.register(name, spec)`` is ``CREATE MODEL name USING 'spec'``."""
        return self.session.engine.models

    def model_statement(self, statement: ModelStatement) -> str:
        """Apply a ``CREATE``/``DROP``/``SHOW MODELS`` statement; the SQL that answers it."""
        self._forget_plans()  # a remembered route checked the models it names
        if statement.verb == "show":
            return self.models_sql()
        if statement.verb == "drop":
            self.models.drop(statement.name, missing_ok=statement.if_exists)
        elif not (statement.if_exists and statement.name.lower() in self.models.names()):
            self.models.register(statement.name, statement.spec,
                                 replace_existing=statement.replace)  # fmt: skip
        return "SELECT 1 WHERE false"

    def models_sql(self) -> str:
        """The SQL of ``SHOW MODELS``: one row per model (name, spec, backend_id)."""

        def lit(text: str) -> str:
            return "'" + text.replace("'", "''") + "'"

        rows = ", ".join(
            f"({lit(m.name)}, {lit(m.spec)}, {lit(m.backend_id)})" for m in self.models.info()
        )
        return f"SELECT * FROM (VALUES {rows}) AS models(name, spec, backend_id)"

    def stats(self) -> QueryStats:
        """LLM usage of the last query: virtual and physical calls and tokens, cache hits."""
        return self.session.query.stats()

    def query_progress(self) -> float:
        """As DuckDB's: the running query's percentage done (-1 when there is none); for a
        planned query the share of its driving rows the SEU loop has processed."""
        run: Any = self.session.query.run
        progress = None if run is None else run.progress()
        if progress is not None and progress.rows_total and not progress.finished:
            return 100.0 * float(progress.fraction)
        return float(self._con.query_progress())

    def semantic_progress(self) -> QueryProgress:
        """The running (or last) planned query's progress at its latest SEU boundary:
        a ``runtime.QueryProgress`` (batches done, rows out, estimated remaining cost)."""
        run: Any = self.session.query.run
        if run is None:
            return QueryProgress()
        return run.progress()  # type: ignore[no-any-return]

    def explain_semantic(self, query: str, *, analyze: bool = False, verbose: bool = False) -> str:
        """``EXPLAIN [ANALYZE] SEMANTIC query`` as text (see :mod:`duckdb_sem.session.explain`)."""
        return explain_semantic(
            self,
            normalize_aliases(query, models=self.models.names()),
            analyze=analyze,
            verbose=verbose,
        )

    def interrupt(self) -> None:
        """Cancel the running query: its queued LLM work is dropped, DuckDB is interrupted."""
        query = self.session.query  # read once: the flag and the cancel name the same query
        query.cancelled.set()
        self.session.engine.cancel(query.query_id)
        self._con.interrupt()

    def close(self) -> None:
        self.discard_results()
        self._sources.close()  # input cursors of table functions never read
        self.session.uninstall()
        self._con.close()
        self.session.release()  # this connection's share of the scheduler

    def __enter__(self) -> SemConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ------------------------------------------------------------------------------
    def route(self, statement: Statement, params: Sequence[Any] | None = None) -> Route:
        """The one front end (:mod:`.statements`): a statement without a semantic call goes
        to DuckDB untouched; one with a semantic call is parsed once and planned (nothing
        runs: the plan is only built) or, where it cannot be, bound for the UDF path."""
        self.session.new_query(on_progress=self.on_progress, budget=self.budget)
        sql = statement.sql
        if not self._router.is_semantic(sql):
            self._forget_plans()  # it may be DDL that changes what a remembered plan reads
            if statement.objects:  # table functions: their LLM work runs as they are read
                return Route(sql, why="its semantic work is in table functions (sem_join, "
                             "sem_topk, ...), which run their own plans as DuckDB reads "
                             "them", statement=sql)  # fmt: skip
            return Route(sql, why="it has no semantic call: DuckDB runs it alone", statement=sql)
        again = self._plans.get(sql) if not params and self.optimize else None
        if again is not None and again.planned is not None:
            return again  # planned before, and no statement since could change the catalog
        route = self._router.route(sql, statement.tree, params, optimize=self.optimize)
        if route.planned is None:
            self._forget_plans()
        else:
            for key in {route.statement, sql} if not params else {route.statement}:
                self._plans[key] = route
                self._plans.move_to_end(key)
            while len(self._plans) > 64:
                self._plans.popitem(last=False)
        return route

    @property
    def sources(self) -> SourceRegistry:
        """What statements read from Python (caller-scope DataFrames, table functions)."""
        return self._sources

    def placeholders(self, planned: Planned) -> dict[str, pa.Table]:
        """An empty table of each unit's schema, by name: what planning the rest of a
        statement reads in their place before they run (``EXPLAIN``)."""
        return {name: self._router.schema_of(unit).empty_table()
                for name, unit in planned.units_in_order()}  # fmt: skip

    def describe(self, sql: str) -> list[str]:
        """The column names of ``sql``'s result, as DuckDB names them (it runs)."""
        return [d[0] for d in self._con.execute(sql).description or []]

    def _forget_plans(self) -> None:
        self._plans.clear()
        self._prepared.clear()
        self._router.views.changed()

    def stream_planned(self, sql: str, *, route: Route | None = None) -> PlannedStream:
        """Run the planned statement ``sql`` (``route``: its route, when the caller has it)
        in this session: the result stream of a new query, inside the statement's
        transaction, SEU by SEU as it is read (a write runs to its end now, and the stream
        holds its count). A result of this connection not read to its end is discarded
        first, as DuckDB does."""
        self.discard_results()
        held = self._statements.get(sql)
        if held is not None:  # its DataFrames and table functions, while it runs
            self._sources.bring_back(held)
        try:
            route = route or self._plans.get(sql) or self.route(held or self._sources.open(sql))
            planned = route.planned
            if planned is None:
                raise PlanError(f"not a planned statement: {route.why}")
            query = self.session.new_query(on_progress=self.on_progress, budget=self.budget)
            transaction = StatementTransaction(self._con)
        except BaseException as err:
            if held is not None:
                self._sources.set_aside(held)
            # it failed as it ran: as a DuckDB runtime error, it aborts the user's transaction
            # (a binding error found only now does not, as DuckDB's binder errors in sql())
            if isinstance(err, SemError) and not isinstance(err, BindError):
                abort_user_transaction(self._con, err)
            raise
        if held is not None:
            transaction.on_end(lambda: self._sources.set_aside(held))
        names: list[str] | None = None
        types: list[str] | None = None

        def run(select_sql: str, plan: Any) -> pa.RecordBatchReader:
            nonlocal names, types
            options = self.runtime_options()
            known = self._prepared.get(select_sql)
            same = known is not None and known[0].written is plan and known[3] == _key(options)
            again = known[0] if known is not None and same else None
            if again is None:
                names, types = self._duckdb_shape(select_sql)
            else:
                names, types = known[1], known[2]  # type: ignore[index]
            prepared = prepare(self._con, select_sql, self.session.engine, options,
                               query=query, written=plan, again=again)  # fmt: skip
            self._prepared[select_sql] = (prepared, names, types, _key(options))
            return run_prepared(self._con, prepared, self.session.engine, query, options)

        try:
            rows = open_rows(self._con, planned, transaction, run=run)
            if route.write is not None:
                count = write_rows(self._con, route.write, rows)
                if route.write.kind == "create":
                    self._forget_plans()
                transaction.commit()
                rows = count_table(count).to_reader()
                names = types = None
        except BaseException as err:
            transaction.fail(err)
            raise
        self._open = PlannedStream(rows, transaction, names=names, types=types, con=self._con)
        return self._open

    def discard_results(self) -> None:
        """Close what this connection's last statement left unread: a planned result stream
        (its transaction ends; no more LLM work is done for it) or DuckDB's pending result."""
        for stream in (self._pending, self._open):
            if stream is not None:
                stream.close()
        self._pending = self._open = None
        settle(self._con)  # a failed statement's transaction DuckDB refused to end then
        if self._raw_pending:
            self._raw_pending = False
            with contextlib.suppress(duckdb.Error):  # nothing left to abort
                self._con.abort()  # DuckDB's own: cancel the rest of execute()'s result

    def _duckdb_shape(self, sql: str) -> tuple[list[str] | None, list[str] | None]:
        """The column names and types DuckDB gives ``sql`` (``count_star()``, ``(id + 1)``,
        ``sem_map('{text} short')``; ``HUGEINT`` for a ``sum``), so a planned result is
        named and typed as DuckDB would: only binds (the ``sem_*`` macros accept the named
        form), nothing runs."""
        try:
            rel = self._con.sql(sql)
        except duckdb.Error:
            return None, None
        return list(rel.columns), [str(t) for t in rel.types]

    def runtime_options(self) -> RuntimeOptions:
        """How this connection's planned queries run: its runtime, with its approximation."""
        options = self.runtime or options_from_settings(self.settings)
        return dataclasses.replace(options, approximation=self.approximation)

    def option_value(self, name: str) -> str:
        """``SHOW duckdb_sem.<name>``: a budget (``DEFAULT`` when unlimited) or an
        approximation setting (``on``/``off``, the recall target)."""
        name = name.lower()
        _check_setting(name)
        if name in APPROXIMATION_SETTINGS:
            return self.approximation.value(name)
        value = getattr(self.budget, name)
        return "DEFAULT" if value is None else str(value)

    def set_option(self, name: str, value: str | None) -> None:
        """``SET duckdb_sem.<name> = value`` (``value`` None or ``DEFAULT``: back to the
        connection's own setting): the budget settings of :mod:`duckdb_sem.runtime.budget`
        (``SET ... = NULL`` lifts the limit) and the approximation settings of
        :mod:`duckdb_sem.runtime.approximation`."""
        name = name.lower()
        _check_setting(name)
        self._forget_plans()  # what a statement prepares depends on these
        if name in APPROXIMATION_SETTINGS:
            connected = approximation_of(self.settings)
            self.approximation = self.approximation.with_setting(name, value, connected)
            return
        if value is None or value.strip().strip("'").lower() == "default":
            default = getattr(self.settings, name, None)  # RESET, DEFAULT: as connected
            value = None if default is None else str(default)
            self.budget = self.budget.with_setting(name, value)
            if name in PER_SESSION and self.budget.session is not None:  # and count again
                self.budget.session.restart(name.removeprefix("max_").removesuffix("_per_session"))
            return
        self.budget = self.budget.with_setting(name, value)

    def _maybe_setting(self, query: str) -> str | None:
        """Apply ``SET``/``RESET``/``SHOW duckdb_sem.*``; the SQL that answers it, or None."""
        match = _SETTING.match(query)
        if match is None:
            return None
        verb, name = match["verb"].upper(), match["name"].lower()
        if verb == "SET":
            self.set_option(name, match["value"])
        elif verb == "RESET":
            self.set_option(name, None)
        else:
            _check_setting(name)
        shown = self.option_value(name)
        return (
            f"SELECT '{shown}' AS \"duckdb_sem.{name}\""
            if verb == "SHOW"
            else "SELECT 1 WHERE false"
        )

    def _maybe_explain(self, query: str) -> list[str] | None:
        match = _EXPLAIN.match(query)
        if match is None:
            return None
        text = self.explain_semantic(
            query[match.end() :], analyze=bool(match.group(1)), verbose=bool(match.group(2))
        )
        return text.splitlines()

    def translating(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except SemError:
                raise  # ours already (a duckdb.Error too)
            except duckdb.Error as err:
                cause = self.session.last_error
                if cause is not None:
                    self.session.last_error = None
                    raise cause from err
                if self.session.query.cancelled.is_set():
                    raise QueryCancelledError(
                        f"query {self.session.query.query_id} was cancelled"
                    ) from err
                raise

        return call


def _key(options: RuntimeOptions) -> tuple[object, ...]:
    """What of the runtime options a statement's preparation depends on."""
    return (options.mode, options.sample_rows, options.seed, id(options.estimator),
            options.approximation)  # fmt: skip


def _check_setting(name: str) -> None:
    """Raise unless ``name`` is a ``duckdb_sem.*`` setting (budgets and approximation)."""
    if name not in (*BUDGET_SETTINGS, *APPROXIMATION_SETTINGS):
        raise ConfigError(
            f"unknown setting duckdb_sem.{name}; the settings are "
            + ", ".join(f"duckdb_sem.{s}" for s in (*BUDGET_SETTINGS, *APPROXIMATION_SETTINGS))
        )


_READS = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN,
          duckdb.StatementType.RELATION}  # fmt: skip


def _writes(query: str) -> bool:
    """Whether ``query`` is a statement ``con.sql`` runs at once (not a query): its failure
    aborts the transaction in DuckDB."""
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error:
        return True  # DuckDB's own parser error aborts too
    return any(s.type not in _READS for s in statements)
