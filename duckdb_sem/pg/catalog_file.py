"""The catalog ``alias`` in DuckDB: one view per PostgreSQL table, so clients can list them.

The views are written to a private DuckDB file attached ``READ_ONLY``, so the catalog is the
same for every connection of the instance and none can add to it; scanning a view without the
statement rewrite raises an error that says so (whatever the filter), never returns no rows.
When PostgreSQL's tables change (one created, dropped or altered after the attach), the file
is written again beside the attached one, moved over it, and attached again under the same
name, so ``\\dt``, ``information_schema`` and ``DESCRIBE`` show the tables as they are now. The
wire server lets DuckDB reach exactly this file (and its WAL name) after external access is
switched off (:attr:`CatalogFile.paths`); DuckDB refuses ``COPY ... TO`` an attached file.

Example: ``CatalogFile.create(con, "pg", tables)`` attaches ``pg`` with a view ``pg.public.t``
per table; ``catalog.refresh(con, tables)`` after ``CREATE TABLE public.u`` adds ``pg.public.u``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import weakref
from pathlib import Path

import duckdb

from duckdb_sem.identifiers import quote_identifier as _ident
from duckdb_sem.pg.catalog import PgTable
from duckdb_sem.pg.types import read_as

__all__ = ["CatalogFile"]

Tables = dict[tuple[str, str], PgTable]


class CatalogFile:
    """The attached catalog file of one PostgreSQL source; thread-safe."""

    def __init__(self, alias: str, path: Path, tables: Tables) -> None:
        self.alias = alias
        self.path = path
        self._built = dict(tables)
        self._lock = threading.Lock()
        #: how many times the file was attached again
        self.generation = 0

    @classmethod
    def create(cls, con: duckdb.DuckDBPyConnection, alias: str, tables: Tables) -> CatalogFile:
        """Write the catalog of ``tables`` to a private file and attach it to ``con``."""
        folder = Path(tempfile.mkdtemp(prefix="duckdb-sem-pg-"))
        catalog = cls(alias, folder / f"{alias}.duckdb", tables)
        _write(catalog.path, alias, tables)
        weakref.finalize(catalog, shutil.rmtree, folder, ignore_errors=True)
        catalog._attach(con)
        return catalog

    @property
    def paths(self) -> tuple[str, str]:
        """What DuckDB must be allowed to open to attach the file again (``allowed_paths``)."""
        return str(self.path), f"{self.path}.wal"

    def refresh(self, con: duckdb.DuckDBPyConnection, tables: Tables) -> bool:
        """Attach the catalog of ``tables`` in place of the old one, if they differ."""
        with self._lock:
            if tables == self._built:
                return False
            fresh = self.path.with_name(f".{self.path.name}.new")
            fresh.unlink(missing_ok=True)
            _write(fresh, self.alias, tables)
            con.execute(f"DETACH {_ident(self.alias)}")
            try:
                os.replace(fresh, self.path)
            finally:
                self._attach(con)
            self._built = dict(tables)
            self.generation += 1
            return True

    def _attach(self, con: duckdb.DuckDBPyConnection) -> None:
        quoted = str(self.path).replace("'", "''")
        con.execute(f"ATTACH '{quoted}' AS {_ident(self.alias)} (READ_ONLY)")


def _write(path: Path, alias: str, tables: Tables) -> None:
    build = duckdb.connect(str(path))
    try:
        for schema in sorted({schema for schema, _ in tables}):
            if schema != "main":
                build.execute(f"CREATE SCHEMA IF NOT EXISTS {_ident(schema)}")
        for table in tables.values():
            build.execute(_view_sql(alias, table))
            # The wire server's catalog lists views with this comment as tables.
            view = f"{_ident(table.schema)}.{_ident(table.name)}"
            comment = f"PostgreSQL table {table.schema}.{table.name}".replace("'", "''")
            build.execute(f"COMMENT ON VIEW {view} IS '{comment}'")
    finally:
        build.close()


def _view_sql(alias: str, table: PgTable) -> str:
    # Every column and the row itself raise: no filter or projection can make DuckDB skip the
    # error and return no rows instead.
    message = (
        f"{alias}.{table.schema}.{table.name} is a PostgreSQL table: read it through duckdb-sem "
        f"(the wire server, or sql = source.rewrite(sql, con) from attach_postgres)"
    ).replace("'", "''")
    fail = f"error('{message}')"
    columns = ", ".join(
        f"{fail}::{read_as(c.pg_type).duck_type} AS {_ident(c.name)}" for c in table.columns
    )
    return (
        f"CREATE VIEW {_ident(table.schema)}.{_ident(table.name)} AS "
        f"SELECT {columns} FROM range(1) WHERE {fail} IS NULL"
    )
