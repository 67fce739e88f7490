"""A PostgreSQL database attached to a DuckDB connection as ``alias.schema.table``.

DuckDB 2.x has no postgres extension offline and no Python table functions, so reads are
routed by rewriting: :meth:`PgSource.rewrite` replaces each ``alias.schema.table`` in a
statement with a freshly registered Arrow table holding only the rows and columns the statement
needs (see :mod:`duckdb_sem.pg.pushdown`), read with ``COPY``. The catalog ``alias`` also
exists in DuckDB (a small database file with one view per table, of the right columns), so
clients can list and describe the tables; it is attached read-only, and scanning such a view
without the rewrite raises an error that says so (whatever the filter), never returns no rows.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import re
import shutil
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import sqlglot
from sqlglot import exp

from duckdb_sem.errors import ConfigError, PlanError
from duckdb_sem.identifiers import quote_identifier as _ident
from duckdb_sem.pg.catalog import PgTable, list_tables
from duckdb_sem.pg.pushdown import scan_needs
from duckdb_sem.pg.reader import connect, read_query
from duckdb_sem.pg.types import read_as

__all__ = ["PgSource", "PgTable", "attach_postgres"]

log = logging.getLogger(__name__)
_scan_ids = itertools.count(1)


def _duck_type(pg_type: str) -> str:
    return read_as(pg_type).duck_type


class PgSource:
    """One attached PostgreSQL database; thread-safe."""

    def __init__(self, dsn: str, alias: str, tables: dict[tuple[str, str], PgTable]) -> None:
        self.dsn = dsn
        self.alias = alias
        self.tables = tables
        self._mention = re.compile(rf"\b{re.escape(alias)}\s*\.", re.IGNORECASE)
        self._lock = threading.Lock()
        self._registered: weakref.WeakKeyDictionary[Any, list[str]] = weakref.WeakKeyDictionary()

    def table(self, schema: str, name: str) -> PgTable | None:
        """The table as the last catalog read saw it."""
        return self.tables.get((schema.lower(), name.lower()))

    def _current(
        self, conn: psycopg.Connection[tuple[object, ...]], schema: str, name: str
    ) -> PgTable | None:
        """The table as PostgreSQL has it now (created, altered or dropped since the attach)."""
        key = (schema.lower(), name.lower())
        found = list_tables(conn, only=key).get(key)
        with self._lock:
            known = self.tables.pop(key, None)
            if found is not None:
                self.tables[key] = found
        if found is None and known is not None:
            raise PlanError(
                f"{self.alias}.{known.schema}.{known.name} no longer exists in PostgreSQL "
                "(dropped or renamed after the attach): read the table by its current name"
            )
        return found

    def rewrite(self, sql: str, con: duckdb.DuckDBPyConnection) -> str:
        """``sql`` with every read of ``alias.schema.table`` replaced by a pushed-down scan.

        The scans are registered on ``con`` and live until its next rewrite.
        """
        return self.rewrite_parsed(sql, con)[0]

    def rewrite_parsed(
        self, sql: str, con: duckdb.DuckDBPyConnection, tree: exp.Expr | None = None
    ) -> tuple[str, exp.Expr | None]:
        """:meth:`rewrite`, and the AST of the SQL it returns when it parsed one (``tree``: the
        AST of ``sql``, when a caller has it), so the statement is not parsed again."""
        self._release(con)
        if not self._mention.search(sql):
            return sql, tree
        try:
            root = tree if tree is not None else sqlglot.parse_one(sql, dialect="duckdb")
        except sqlglot.errors.ParseError as err:
            try:
                con.extract_statements(sql)
            except duckdb.Error:
                return sql, None  # DuckDB will report the syntax error itself
            raise PlanError(
                f"this statement reads {self.alias}.* (PostgreSQL) but cannot be rewritten to do "
                f"so: {str(err).splitlines()[0][:200]}; read the table in a simpler query first, "
                "e.g. CREATE TEMP TABLE t AS SELECT ... FROM " + f"{self.alias}.schema.table"
            ) from None
        refs = [t for t in root.find_all(exp.Table) if t.catalog.lower() == self.alias.lower()]
        if not refs:
            return sql, root
        names: list[str] = []
        try:
            with connect(self.dsn) as conn:
                for ref in refs:
                    scan = self._scan(conn, root, ref, con)
                    if scan is not None:
                        names.append(scan)
        finally:  # a read that fails drops the scans registered before it at the next rewrite
            with self._lock:
                self._registered[con] = names
        return str(root.sql(dialect="duckdb", normalize_functions=False)), root

    def _scan(
        self,
        conn: psycopg.Connection[tuple[object, ...]],
        root: exp.Expr,
        ref: exp.Table,
        con: duckdb.DuckDBPyConnection,
    ) -> str | None:
        """Read what ``root`` needs of ``ref``, register it on ``con``, point ``ref`` at it."""
        table = self._current(conn, ref.db or "public", ref.name)
        if table is None:
            return None  # DuckDB reports the unknown table
        needs = scan_needs(root, ref, [c.name for c in table.columns])
        wanted = [c for c in table.columns if c.name in needs.columns]
        log.debug("pg scan %s: columns %s where %s", table.sql, needs.columns, needs.where)
        data = read_query(conn, table.sql, wanted, needs.where)
        scan = f"__pg_scan_{next(_scan_ids)}"
        con.register(scan, data)
        ref.replace(
            exp.Table(
                this=exp.to_identifier(scan),
                alias=exp.TableAlias(this=exp.to_identifier(ref.alias_or_name)),
            )
        )
        return scan

    def _release(self, con: duckdb.DuckDBPyConnection) -> None:
        with self._lock:
            names = self._registered.pop(con, [])
        for name in names:
            with contextlib.suppress(duckdb.Error):
                con.unregister(name)

    def create_catalog(self, con: duckdb.DuckDBPyConnection) -> None:
        """Attach ``alias``, read-only, with one view per table (scanning one explains why not).

        The views are written to a private file attached ``READ_ONLY``, so the catalog is the
        same for every connection of the instance and none can add to it.
        """
        folder = Path(tempfile.mkdtemp(prefix="duckdb-sem-pg-"))
        path = folder / f"{self.alias}.duckdb"
        build = duckdb.connect(str(path))
        try:
            for schema in sorted({schema for schema, _ in self.tables}):
                if schema != "main":
                    build.execute(f"CREATE SCHEMA IF NOT EXISTS {_ident(schema)}")
            for table in self.tables.values():
                build.execute(_view_sql(self.alias, table))
                # The wire server's catalog lists views with this comment as tables.
                view = f"{_ident(table.schema)}.{_ident(table.name)}"
                comment = f"PostgreSQL table {table.schema}.{table.name}".replace("'", "''")
                build.execute(f"COMMENT ON VIEW {view} IS '{comment}'")
        finally:
            build.close()
        weakref.finalize(self, shutil.rmtree, folder, ignore_errors=True)
        quoted = str(path).replace("'", "''")
        con.execute(f"ATTACH '{quoted}' AS {_ident(self.alias)} (READ_ONLY)")


def _view_sql(alias: str, table: PgTable) -> str:
    # Every column and the row itself raise: no filter or projection can make DuckDB skip the
    # error and return no rows instead.
    message = (
        f"{alias}.{table.schema}.{table.name} is a PostgreSQL table: read it through duckdb-sem "
        f"(the wire server, or sql = source.rewrite(sql, con) from attach_postgres)"
    ).replace("'", "''")
    fail = f"error('{message}')"
    columns = ", ".join(
        f"{fail}::{_duck_type(c.pg_type)} AS {_ident(c.name)}" for c in table.columns
    )
    return (
        f"CREATE VIEW {_ident(table.schema)}.{_ident(table.name)} AS "
        f"SELECT {columns} FROM range(1) WHERE {fail} IS NULL"
    )


def attach_postgres(con: duckdb.DuckDBPyConnection, dsn: str, *, alias: str = "pg") -> PgSource:
    """Attach the PostgreSQL database at ``dsn`` (libpq syntax) to ``con`` as ``alias``.

    Returns the :class:`PgSource`; pass each statement through ``source.rewrite(sql, con)``
    (the wire server does) so reads of ``alias.schema.table`` go to PostgreSQL.
    """
    if not alias.isidentifier():
        raise ConfigError(f"alias {alias!r} must be a plain identifier, e.g. 'pg'")
    with connect(dsn) as conn:
        tables = list_tables(conn)
    source = PgSource(dsn, alias, tables)
    source.create_catalog(con)
    return source
