"""A PostgreSQL database attached to a DuckDB connection as ``alias.schema.table``.

DuckDB 2.x has no postgres extension offline and no Python table functions, so reads are
routed by rewriting: :meth:`PgSource.rewrite` replaces each ``alias.schema.table`` in a
statement with a freshly registered Arrow table holding only the rows and columns the statement
needs (see :mod:`duckdb_sem.pg.pushdown`), read with ``COPY``. The catalog ``alias`` also
exists in DuckDB (:mod:`duckdb_sem.pg.catalog_file`: one view per table, of the right columns),
so clients can list and describe the tables; :meth:`PgSource.refresh_catalog` attaches it
again when PostgreSQL's tables changed, before a statement that lists them.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import re
import threading
import weakref
from typing import Any

import duckdb
import psycopg
import sqlglot
from sqlglot import exp

from duckdb_sem.errors import CatalogChangedError, ConfigError, PlanError
from duckdb_sem.pg.catalog import PgTable, list_tables
from duckdb_sem.pg.catalog_file import CatalogFile
from duckdb_sem.pg.pushdown import scan_needs
from duckdb_sem.pg.reader import connect, read_query
from duckdb_sem.session.transaction import transaction_id

__all__ = ["PgSource", "PgTable", "attach_postgres"]

log = logging.getLogger(__name__)
_scan_ids = itertools.count(1)


#: ``DESCRIBE pg.s.t`` (``SHOW``): the catalog's view answers, nothing is read
_DESCRIBE_TABLE = re.compile(r'^\s*(?:DESCRIBE|SHOW)\s+(?:"[^"]*"|[\w$.])+\s*;?\s*$', re.I)
#: words of a statement that may list tables: the catalog is re-read before it
_LISTING = re.compile(
    r"\b(?:information_schema|pg_catalog|pg_class|pg_namespace|pg_attribute|pg_tables|pg_views"
    r"|duckdb_(?:tables|views|columns|schemas|constraints|indexes)|regclass|show|describe)\b",
    re.IGNORECASE,
)


class PgSource:
    """One attached PostgreSQL database; thread-safe."""

    def __init__(self, dsn: str, alias: str, tables: dict[tuple[str, str], PgTable]) -> None:
        self.dsn = dsn
        self.alias = alias
        self.tables = tables
        self._mention = re.compile(rf"\b{re.escape(alias)}\s*\.", re.IGNORECASE)
        self._lock = threading.Lock()
        self._registered: weakref.WeakKeyDictionary[Any, list[str]] = weakref.WeakKeyDictionary()
        #: the attached catalog (None until attached) and the connection that re-attaches it
        self.catalog: CatalogFile | None = None
        self._catalog_con: duckdb.DuckDBPyConnection | None = None
        #: per connection, the transaction whose first listing read the catalog
        self._listed: weakref.WeakKeyDictionary[Any, tuple[int, int]] = weakref.WeakKeyDictionary()

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
        self.refresh_catalog(sql, con)  # tables created since the attach: listed
        if not self._mention.search(sql) or _DESCRIBE_TABLE.match(sql):
            return sql, tree  # DESCRIBE pg.s.t: the catalog view has the table's columns
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

    def refresh_catalog(self, sql: str, con: duckdb.DuckDBPyConnection) -> bool:
        """Before ``sql`` runs on ``con``: if it may list tables (``information_schema``,
        ``pg_catalog``, ``SHOW``, ``DESCRIBE``...), read PostgreSQL's tables again and attach
        the catalog of them when they changed. Inside an explicit transaction the listing
        stays as its first listing saw it, as in PostgreSQL's snapshot."""
        if self.catalog is None or not _LISTING.search(sql):
            return False
        transaction = transaction_id(con)
        if transaction is not None:
            with self._lock:
                seen = self._listed.get(con)
            if seen is not None and seen[0] == transaction:
                if seen[1] != self.catalog.generation:  # DuckDB would refuse the new one
                    raise CatalogChangedError(
                        f"the tables of PostgreSQL source {self.alias} changed (another session "
                        "listed them) after this transaction first listed them: roll back and "
                        "retry the transaction"
                    )
                return False
        with connect(self.dsn) as conn:
            tables = list_tables(conn)
        with self._lock:
            self.tables = dict(tables)
        assert self._catalog_con is not None
        changed = self.catalog.refresh(self._catalog_con, tables)
        if transaction is not None:
            with self._lock:
                self._listed[con] = (transaction, self.catalog.generation)
        return changed


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
    source.catalog = CatalogFile.create(con, alias, tables)
    source._catalog_con = con.cursor()
    return source
