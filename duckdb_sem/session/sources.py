"""What a statement reads besides the catalog: caller-scope DataFrames and table functions.

Before a statement is bound, :meth:`SourceRegistry.open`

1. registers what the statement names that lives in the *caller's* scope (the first frame outside
   duckdb-sem) and DuckDB would scan (DataFrames, Arrow objects, relations, numpy arrays and
   dicts of them), when the statement has a semantic call: our binding and plan executor query
   DuckDB from inside this package, where DuckDB's own lookup would not see the caller's
   variables. Catalog tables and views win over Python variables, as in DuckDB, and nothing is
   registered where ``enable_external_access`` is off (DuckDB then reads no caller variable).
   A statement DuckDB runs alone is not registered for: it is handed to DuckDB from the caller's
   scope (:mod:`.caller_scope`), and DuckDB finds the variables itself;
2. replaces each semantic table function (``surface.table_functions``) by a registered
   :class:`~duckdb_sem.runtime.table_sources.LazyArrowSource`. An input query with a semantic
   call is described when the statement is opened and read (bound and optimized as a query of
   its own) when DuckDB first pulls the function's batches, as the function's own LLM work is;
   other inputs are read when the statement is opened.

Registrations live as long as the :class:`Statement` (held by the relation the statement
returned, or until the next ``execute``); they are dropped at the start of a later statement.
The caller's variables are released (:meth:`SourceRegistry.release_caller`) before a statement
off the planner goes to DuckDB, so DuckDB holds them as for its own statements, and a variable
the caller deleted is not read by a later statement.
A planned statement's are set aside (unregistered) between its planning and its run and
registered again only while it runs (:meth:`SourceRegistry.set_aside`, ``bring_back``), so
``SHOW TABLES`` never lists them.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import weakref
from collections.abc import Callable, Iterable, Iterator
from types import FrameType
from typing import Any

import duckdb
import pyarrow as pa
from sqlglot import exp

from duckdb_sem.errors import BindError, SemError
from duckdb_sem.identifiers import quote_identifier as _q
from duckdb_sem.runtime import similarity as sim
from duckdb_sem.runtime import table_sources as ts
from duckdb_sem.runtime.blocking import embeddings_of
from duckdb_sem.runtime.ranking import explain_line
from duckdb_sem.session.caller_scope import HandsOver, caller_frame
from duckdb_sem.session.protocol import Session
from duckdb_sem.session.statements import registered
from duckdb_sem.surface.bind import has_semantic_call, parse_statement
from duckdb_sem.surface.similarity_calls import SimilarityCall, check_text_column
from duckdb_sem.surface.table_functions import (
    TableCall,
    bind_fields,
    has_table_function,
    rewrite_table_functions,
)

__all__ = ["SourceRegistry", "Statement", "caller_frame", "is_arrow_like", "is_scannable"]

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_serials = itertools.count(1)
_FRAME_MODULES = {"pandas", "polars"}


def is_arrow_like(obj: object) -> bool:
    """Objects DuckDB scans like tables: DataFrames, Arrow tables, readers and streams."""
    if isinstance(obj, type):
        return False
    if isinstance(obj, pa.Table | pa.RecordBatch | pa.RecordBatchReader):
        return True
    cls = type(obj)
    if cls.__name__ in {"DataFrame", "LazyFrame", "Series"}:
        return cls.__module__.split(".")[0] in _FRAME_MODULES
    return hasattr(obj, "__arrow_c_stream__") or hasattr(obj, "__arrow_c_array__")


def is_scannable(obj: object) -> bool:
    """Objects DuckDB's replacement scan reads as a table: :func:`is_arrow_like` ones, DuckDB
    relations, numpy arrays of one or two dimensions, and dicts or lists of numpy arrays."""
    if isinstance(obj, duckdb.DuckDBPyRelation) or is_arrow_like(obj):
        return True
    if type(obj).__module__ == "numpy" and type(obj).__name__ == "ndarray":
        return getattr(obj, "ndim", 0) in (1, 2)
    values = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, list) else None
    return bool(values) and all(type(v).__name__ == "ndarray" for v in values or ())


class Statement:
    """The rewritten SQL of one statement, keeping its registered sources alive; its sqlglot
    AST is parsed at most once (:meth:`tree`), and every step of the front end reads it."""

    def __init__(self, sql: str, serial: int) -> None:
        self.sql = sql
        self.serial = serial
        #: what it registered, by name (set aside between its planning and its run)
        self.objects: dict[str, object] = {}
        #: the names of :attr:`objects` that are the caller's variables
        self.caller: list[str] = []
        self.aside = False
        #: lines its table functions add to ``EXPLAIN SEMANTIC`` (a ranking's method and bound)
        self.notes: list[str] = []
        self._tree: exp.Expr | None = None

    def tree(self) -> exp.Expr:
        """The AST of :attr:`sql` (``BindError`` if it does not parse as one statement)."""
        if self._tree is None:
            self._tree = parse_statement(self.sql)
        return self._tree

    def tree_or_none(self) -> exp.Expr | None:
        try:
            return self.tree()
        except BindError:
            return None


class SourceRegistry:
    """Per-connection registrations of caller-scope objects and table-function streams."""

    def __init__(self, owner: Session) -> None:
        self._owner = owner
        self._owners: dict[str, int] = {}  # registered name -> serial of its statement
        self._pending: list[tuple[Iterable[str], int]] = []
        #: what each live statement must close when it goes (a table function's input
        #: cursor, released by reading it or, if it is never read, here): serial -> closers
        self._closers: dict[int, list[Callable[[], None]]] = {}
        self._pinned: Statement | None = None
        self._tf = itertools.count(1)

    def open(
        self,
        sql: str,
        *,
        pin: bool = False,
        tree: exp.Expr | None = None,
        caller: bool = True,
    ) -> Statement:
        """Register what ``sql`` reads from Python and rewrite its table functions
        (``tree``: the AST of ``sql``, when the caller parsed it; ``caller``: register the
        caller's variables it names, which a statement DuckDB runs alone does not need)."""
        statement = self._new(sql)
        statement._tree = tree
        if has_table_function(sql):
            statement.sql = rewrite_table_functions(
                sql, lambda call, _alias: self._open_call(statement, call), tree=statement.tree()
            )
        # after the rewrite: a sem_join's inputs are then subqueries of the statement
        found = self.caller_objects(statement.sql, statement) if caller else {}
        for name, obj in found.items():
            self._register(statement, name, obj)
            statement.caller.append(name)
        if pin:
            self._pinned = statement
        return statement

    def hold(self, objects: dict[str, object]) -> Statement:
        """Register ``objects`` by name for as long as the returned holder lives."""
        statement = self._new("")
        for name, obj in objects.items():
            self._register(statement, name, obj)
        return statement

    def caller_objects(self, sql: str, statement: Statement | None = None) -> dict[str, object]:
        """The caller-scope DataFrames/Arrow objects ``sql`` reads that the catalog lacks
        (``statement``: the one ``sql`` is the text of, whose AST is then reused)."""
        frame = caller_frame()
        try:
            return self._caller_objects(sql, frame, statement or Statement(sql, 0))
        finally:
            del frame

    def unique_name(self, kind: str) -> str:
        return f"__sem_{kind}_{id(self):x}_{next(self._tf)}"

    # -- internals ------------------------------------------------------------------------------
    def _new(self, sql: str) -> Statement:
        self._flush()
        statement = Statement(sql, next(_serials))
        weakref.finalize(statement, _defer, self._pending, statement.objects, statement.serial)
        return statement

    def _register(self, statement: Statement, name: str, obj: object) -> None:
        self._owner.duckdb.register(name, obj)
        self._owners[name] = statement.serial
        statement.objects[name] = obj

    def release_caller(self, statement: Statement) -> None:
        """Unregister the caller's variables ``statement`` registered: it goes to DuckDB from
        the caller's scope now, where DuckDB finds and holds them itself."""
        for name in statement.caller:
            statement.objects.pop(name, None)
            if self._owners.get(name) == statement.serial:
                del self._owners[name]
                if not statement.aside:
                    with contextlib.suppress(duckdb.Error):
                        self._owner.duckdb.unregister(name)
        statement.caller.clear()

    def set_aside(self, statement: Statement) -> None:
        """Unregister what ``statement`` registered until it runs (:meth:`bring_back`), so a
        planned statement not yet fetched leaves nothing in ``SHOW TABLES``."""
        if statement.aside:
            return
        statement.aside = True
        for name in statement.objects:
            if self._owners.get(name) == statement.serial:
                with contextlib.suppress(duckdb.Error):
                    self._owner.duckdb.unregister(name)

    def bring_back(self, statement: Statement) -> None:
        """Register again what :meth:`set_aside` unregistered (the statement runs now)."""
        if not statement.aside:
            return
        statement.aside = False
        for name, obj in statement.objects.items():
            if self._owners.get(name) == statement.serial:
                self._owner.duckdb.register(name, obj)

    def close(self) -> None:
        """Close what the live statements hold (their owner connection closes)."""
        self._flush()
        while self._closers:
            for close in self._closers.popitem()[1]:
                close()

    def _flush(self) -> None:
        while self._pending:
            names, serial = self._pending.pop()
            for close in self._closers.pop(serial, ()):
                close()
            for name in names:
                if self._owners.get(name) == serial:
                    del self._owners[name]
                    with contextlib.suppress(duckdb.Error):  # set aside already
                        self._owner.duckdb.unregister(name)

    def _caller_objects(
        self, sql: str, frame: FrameType | None, statement: Statement
    ) -> dict[str, object]:
        if frame is None:
            return {}
        scopes = (frame.f_locals, frame.f_globals)
        found: dict[str, object] = {}
        for word in dict.fromkeys(_WORD.findall(sql)):
            for scope in scopes:
                if word in scope:
                    value = scope[word]
                    if isinstance(value, HandsOver) or is_scannable(value):
                        found[word] = value
                    break
        if not found or not self._external_access():
            return {}
        tables = _table_names(statement.tree_or_none())
        read = {
            name: obj
            for name, obj in found.items()
            if (tables is None or name.lower() in tables)
            and (name in self._owners or not self._in_catalog(name))
        }
        # a SemRelation is read as its DuckDB relation (asked for only when SQL reads it)
        return {n: o.relation if isinstance(o, HandsOver) else o for n, o in read.items()}

    def _external_access(self) -> bool:
        """DuckDB's ``enable_external_access``: off, no caller variable is read, as in DuckDB."""
        # sql(), not execute(): the DB-API result a caller has not read yet stays
        rows = self._owner.duckdb.sql("SELECT current_setting('enable_external_access')").fetchall()
        return bool(rows and rows[0][0])

    def _in_catalog(self, name: str) -> bool:
        rows = self._owner.duckdb.sql(
            "SELECT 1 FROM information_schema.tables WHERE lower(table_name) = lower(?) LIMIT 1",
            params=[name],
        ).fetchall()
        return bool(rows)

    def _open_call(self, statement: Statement, call: TableCall | SimilarityCall) -> str | exp.Query:
        if isinstance(call, SimilarityCall):
            return self._open_similarity(statement, call)
        self._owner.models.check(call.options.model)  # before reading or asking anything
        if call.name == "sem_join":
            return self._join_query(call)
        inputs = [self._input(statement, call, sql) for sql in call.inputs]
        fields = bind_fields(call, [schema.names for schema, _ in inputs])
        columns = [col for _, col in fields.refs]
        session = self._owner.session

        def query() -> Any:
            return session.query

        def remember(err: SemError) -> None:
            session.last_error = err

        batch = self._owner.settings.batch_size
        engine = session.engine
        if call.name == "sem_topk":
            assert call.k is not None
            known = None if has_semantic_call(call.inputs[0]) else inputs[0][1]().num_rows
            statement.notes.append(explain_line(call.options.method, call.k, known))
            schema = ts.topk_schema(inputs[0][0])
            produce = lambda: ts.topk_batches(  # noqa: E731
                inputs[0][1](), fields.template, columns, call.k or 1, engine=engine, query=query,
                options=call.options,
            )  # fmt: skip
        elif call.name == "sem_extract":
            assert call.struct is not None
            struct = call.struct
            schema = ts.extract_schema(inputs[0][0], struct)
            produce = lambda: ts.extract_batches(  # noqa: E731
                inputs[0][1](), fields.template, columns, struct, engine=engine, query=query,
                batch_size=batch, options=call.options,
            )  # fmt: skip
        else:
            raise BindError(f"{call.name} is not a table function that produces rows here")
        name = self.unique_name("tf")
        self._register(statement, name, ts.LazyArrowSource(schema, produce, on_error=remember))
        return name

    def _input(
        self, statement: Statement, call: TableCall | SimilarityCall, sql: str
    ) -> tuple[pa.Schema, Callable[[], pa.Table]]:
        """The schema of an input and how to read it. An input without a semantic call is read
        now (DuckDB work only); one with a semantic call is read when the function's rows are
        first pulled, on a cursor whose queries are this session's current one (counted,
        budgeted and cancelled with it), so opening the statement makes no LLM call. An input
        the cursor cannot see (a TEMP table, a caller-scope DataFrame) is read now."""
        if not has_semantic_call(sql):
            table = self._read_input(call, sql)
            return table.schema, lambda: table
        child = self._owner.cursor()
        child.session.follows = self._owner.session
        self._closers.setdefault(statement.serial, []).append(child.close)
        try:
            # the plan run to LIMIT 0 (or DuckDB's LIMIT 0 on the UDF path): no LLM call
            schema = child.sql(sql).limit(0).to_arrow_reader().schema
        except (duckdb.Error, BindError):
            child.close()
            table = self._read_input(call, sql)
            return table.schema, lambda: table

        def read() -> pa.Table:
            try:
                table: pa.Table = child.sql(sql).to_arrow_reader().read_all()
            finally:
                child.close()
            return table

        return schema, read

    def _open_similarity(self, statement: Statement, call: SimilarityCall) -> str:
        """``sem_sim_join`` / ``sem_search``: inputs checked now (read as :meth:`_input`
        says), embedded at the first pull, ranked in DuckDB on a cursor (see ``_join`` for why
        a cursor)."""
        inputs = [self._input(statement, call, sql) for sql in call.inputs]
        for (schema, _), column in zip(inputs, call.columns, strict=True):
            check_text_column(call, schema, column)
        session = self._owner.session
        embeddings = embeddings_of(session.engine)

        def remember(err: SemError) -> None:
            session.last_error = err

        def produce() -> Iterator[pa.RecordBatch]:
            tables = [read() for _, read in inputs]
            cursor = self._owner.duckdb.cursor()
            try:
                if call.name == "sem_sim_join":
                    left, right = tables
                    yield from sim.sim_join_batches(
                        cursor, left, right, (call.columns[0], call.columns[1]), call.k,
                        embeddings=embeddings, query=session.query,
                    )  # fmt: skip
                else:
                    assert call.text is not None
                    yield from sim.search_batches(
                        cursor, tables[0], call.columns[0], call.text, call.k,
                        embeddings=embeddings, query=session.query,
                    )  # fmt: skip
            finally:
                cursor.close()

        if call.name == "sem_sim_join":
            schema = sim.sim_join_schema(inputs[0][0], inputs[1][0])
        else:
            schema = sim.search_schema(inputs[0][0])
        name = self.unique_name("tf")
        self._register(statement, name, ts.LazyArrowSource(schema, produce, on_error=remember))
        return name

    def _read_input(self, call: TableCall | SimilarityCall, sql: str) -> pa.Table:
        try:
            table: pa.Table = self._owner.sql(sql).to_arrow_table()
        except duckdb.Error as err:
            raise BindError(f"{call.name}: cannot read input {sql!r}: {err}") from None
        return table

    def _join_query(self, call: TableCall) -> exp.Query:
        """``sem_join(left, right, template)`` as the query it means: the pairs of the two
        inputs (each a subquery, aliased ``l`` and ``r``) its ``sem_join`` keeps, both sides'
        columns named as DuckDB names them in a subquery (``id``, ``id_1``). The planner runs
        it like any join: estimated, SEU by SEU, inside the statement's transaction, blocked
        when approximate plans are allowed, and stopped by a LIMIT above it."""
        sides = [self._input_columns(call, sql) for sql in call.inputs]
        fields = bind_fields(call, sides)
        pairs = [("l", c) for c in sides[0]] + [("r", c) for c in sides[1]]
        names = ts.unique_names([c for _, c in pairs])
        items = ", ".join(f"{s}.{_q(c)} AS {_q(n)}" for (s, c), n in zip(pairs, names,
                                                                        strict=True))  # fmt: skip
        args = ", ".join(f"{'lr'[side]}.{_q(col)}" for side, col in fields.refs)
        literal = exp.Literal.string(fields.template).sql(dialect="duckdb")
        left, right = call.inputs
        sql = (
            f"SELECT {items} FROM ({left}) AS l CROSS JOIN ({right}) AS r "
            f"WHERE sem_join({literal}, {args}{call.options.sql_args()})"
        )
        query = parse_statement(sql)
        assert isinstance(query, exp.Query)
        return query

    def _input_columns(self, call: TableCall, sql: str) -> list[str]:
        """An input's column names (DuckDB binds it; a semantic call in it asks nothing)."""
        raw = self._owner.duckdb
        try:
            with registered(raw, self.caller_objects(sql)):  # DataFrames it reads, by name
                names: list[str] = raw.sql(f"SELECT * FROM ({sql}) LIMIT 0").columns
        except duckdb.Error as err:
            raise BindError(f"{call.name}: cannot read input {sql!r}: {err}") from None
        return names


def _defer(pending: list[tuple[Iterable[str], int]], names: Iterable[str], serial: int) -> None:
    # Runs at garbage collection, maybe inside a DuckDB scan: only note; the next statement
    # unregisters.
    pending.append((names, serial))


def _table_names(tree: exp.Expr | None) -> set[str] | None:
    """Lower-case names of the tables ``tree`` reads (CTEs excluded); None if it did not parse."""
    if tree is None:
        return None
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    names = {t.name.lower() for t in tree.find_all(exp.Table) if t.name and not t.db}
    return names - ctes
