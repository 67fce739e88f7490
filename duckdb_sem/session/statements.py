"""The front end of a session: which road a statement takes, and its plan when planned.

A statement without a semantic call goes to DuckDB untouched. One with a semantic call is
parsed once, shaped for the planner (:mod:`duckdb_sem.plan.statement`: writes split off, CTEs
inlined, wrappers read through, semantic views expanded) and planned: a :class:`Planned`
holds the SELECT's written plan and the semantic subqueries (units) computed before it. Only
when that fails does the statement take the UDF path, where DuckDB runs the ``sem_*``
functions where they are written; :attr:`Route.why` says why, for ``EXPLAIN``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa
import sqlglot
from sqlglot import exp

from duckdb_sem.errors import PlanError
from duckdb_sem.llm.call_options import models_named
from duckdb_sem.plan.build import build_plan
from duckdb_sem.plan.nodes import Node
from duckdb_sem.plan.statement import (
    Unit,
    Write,
    extract_units,
    has_semantic,
    shape_statement,
)
from duckdb_sem.runtime.execute_plan import drop_views
from duckdb_sem.surface.bind import bind_sql, has_semantic_call
from duckdb_sem.surface.params import inline_into

__all__ = ["Planned", "Route", "Router", "SemanticViews", "registered"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Planned:
    """A SELECT on the planned road: its SQL (parameters inlined), its written plan (None when
    no semantic call is left in it: DuckDB runs it over its units' rows), and the units it
    reads, each planned the same way and computed before it."""

    sql: str
    plan: Node | None
    units: tuple[tuple[str, Planned], ...] = ()

    def units_in_order(self) -> list[tuple[str, Planned]]:
        """Every unit below this query, by name, in the order they are computed (a unit's
        own units before it)."""
        out: list[tuple[str, Planned]] = []
        for name, unit in self.units:
            out += [*unit.units_in_order(), (name, unit)]
        return out


@dataclass(frozen=True)
class Route:
    """Which road a statement takes. ``planned``: its SELECT on the planned road (with
    ``write``, what is done with the rows); else ``sql`` (bound: every template in the
    explicit form) is run by DuckDB, with ``why`` it is not planned."""

    sql: str
    planned: Planned | None = None
    write: Write | None = None
    why: str = ""
    notes: tuple[str, ...] = field(default=())
    #: the statement's own SQL, parameters inlined (what a relation over it composes with)
    statement: str = ""


class SemanticViews:
    """The views of the database whose definition holds a semantic call, read as their
    SELECT by a planned query. Known from DuckDB's catalog, asked again after a statement
    that may change it (anything but a query)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con
        self._known: dict[str, str] | None = None  # lower-case name -> view SQL

    def changed(self) -> None:
        self._known = None

    def _views(self) -> dict[str, str]:
        if self._known is None:
            try:
                rows = self._con.execute(
                    "SELECT schema_name, view_name, sql FROM duckdb_views() "
                    "WHERE NOT internal AND contains(lower(sql), 'sem_')"
                ).fetchall()
            except duckdb.Error:
                rows = []
            known: dict[str, str] = {}
            for schema, name, sql in rows:
                known.setdefault(str(name).lower(), str(sql))
                known[f"{schema}.{name}".lower()] = str(sql)
            self._known = known
        return self._known

    def mentioned(self, sql: str) -> bool:
        """Whether ``sql`` may read a semantic view (a cheap test on its words)."""
        views = self._views()
        if not views:
            return False
        lowered = sql.lower()
        return any(name.rsplit(".", 1)[-1] in lowered for name in views)

    def __call__(self, table: exp.Table) -> exp.Query | None:
        views = self._views()
        key = f"{table.db}.{table.name}" if table.db else table.name
        sql = views.get(key.lower())
        if sql is None:
            return None
        try:
            create = sqlglot.parse_one(sql, dialect="duckdb")
        except sqlglot.errors.ParseError:
            return None
        body = create.args.get("expression") if isinstance(create, exp.Create) else None
        return body if isinstance(body, exp.Query) and has_semantic(body) else None


class Router:
    """Routes and plans the statements of one session (see the module docstring)."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        *,
        check_model: Callable[[str | None], None],
        ensure_typed_map: Callable[[Any], None],
    ) -> None:
        self._con = con
        self._check_model = check_model
        self._ensure_typed_map = ensure_typed_map
        self.views = SemanticViews(con)

    def is_semantic(self, sql: str) -> bool:
        """Whether ``sql`` has a semantic call, or reads a view that has one."""
        return has_semantic_call(sql) or self.views.mentioned(sql)

    def route(
        self,
        sql: str,
        tree: Callable[[], exp.Expr],
        params: Sequence[Any] | None,
        *,
        optimize: bool,
    ) -> Route:
        """The road of the semantic statement ``sql`` (``tree``: its AST, parsed once)."""
        statement = tree()
        for name in models_named(statement):  # an unknown model fails here, before any call
            self._check_model(name)
        why = "the connection does not optimize (optimize=False)"
        if optimize:
            try:
                return self._planned(statement, params)
            except PlanError as err:
                log.debug("UDF path for this statement: %s", err)
                why = str(err)
        if not isinstance(statement, exp.Query):
            self.views.changed()  # DDL may change what a view or a remembered plan reads
        bound = bind_sql(sql, self._describe, tree=statement)
        for spec in bound.typed_maps:
            self._ensure_typed_map(spec)
        return Route(bound.sql, why=why, statement=sql)

    # -- planning ------------------------------------------------------------------------------
    def _planned(self, statement: exp.Expr, params: Sequence[Any] | None) -> Route:
        if params:
            inlined = inline_into(statement, params)
            if inlined is None:
                raise PlanError("its parameters cannot be written as literals")
            statement = inlined
        shaped = shape_statement(statement, views=self.views)
        planned = self.plan_query(shaped.select, units=shaped.units,
                                  rowid_of=shaped.write.rowid_of if shaped.write else None)  # fmt: skip
        if planned.plan is None and not planned.units:  # e.g. only table functions' work
            raise PlanError("it has no semantic call outside table functions")
        if shaped.write is not None and shaped.write.kind == "create":
            self.views.changed()
        text = statement.sql(dialect="duckdb", normalize_functions=False)
        return Route(planned.sql, planned=planned, write=shaped.write, notes=shaped.notes,
                     statement=text)  # fmt: skip

    def plan_query(
        self, query: exp.Query, *, units: Sequence[Unit] = (), rowid_of: str | None = None
    ) -> Planned:
        """``query`` on the planned road: built by the plan builder, or, where it cannot be,
        with its semantic subqueries taken out as units (each planned the same way)."""
        return self._plan(query, self._plan_units(units), rowid_of)

    def _plan_units(self, units: Sequence[Unit]) -> tuple[tuple[str, Planned], ...]:
        return tuple((u.name, self.plan_query(u.query)) for u in units)

    def _plan(
        self, query: exp.Query, units: tuple[tuple[str, Planned], ...], rowid_of: str | None
    ) -> Planned:
        sql = query.sql(dialect="duckdb", normalize_functions=False)
        if not has_semantic(query):
            return Planned(sql, None, units)
        try:
            return Planned(sql, build_plan(query, self._columns(units, rowid_of)), units)
        except PlanError as first:
            try:
                outer, more = extract_units(query)
            except PlanError as err:
                raise PlanError(f"{first} ({err})") from None
            return self._plan(outer, (*units, *self._plan_units(more)), rowid_of)

    def _columns(
        self, units: Sequence[tuple[str, Planned]], rowid_of: str | None
    ) -> Callable[[str], Sequence[str]]:
        """The column lister of the plan builder: DuckDB's description of a table; a unit's
        columns from its own query; the rowid of the table an UPDATE or DELETE changes."""
        known = dict(units)

        def columns(table: str) -> Sequence[str]:
            unit = known.get(table.strip('"'))
            if unit is not None:
                return list(self.schema_of(unit).names)
            # DuckDB's own error (a missing table, an aborted transaction) says what is wrong
            names: list[str] = self._con.sql(f"SELECT * FROM {table} LIMIT 0").columns
            if rowid_of is not None and table == rowid_of:
                names = [*names, "rowid"]
            return names

        return columns

    def schema_of(self, planned: Planned) -> pa.Schema:
        """The schema of a planned query's result; nothing runs (DuckDB binds its SQL, the
        units it reads stood in for by empty tables of their own schemas)."""
        empty = {name: self.schema_of(unit).empty_table() for name, unit in planned.units}
        with registered(self._con, empty):
            table = self._con.sql(f"SELECT * FROM ({planned.sql}) LIMIT 0").to_arrow_table()
        schema: pa.Schema = table.schema
        return schema

    def _describe(self, sql: str) -> list[str]:
        return [d[0] for d in self._con.execute(sql).description or []]


@contextlib.contextmanager
def registered(con: duckdb.DuckDBPyConnection, tables: dict[str, Any]) -> Iterator[None]:
    """``tables`` registered in ``con`` by name while the block runs (a statement's units:
    never left in the catalog for ``SHOW TABLES`` to list)."""
    for name, table in tables.items():
        con.register(name, table)
    try:
        yield
    finally:
        drop_views(con, list(tables))
