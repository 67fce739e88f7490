"""The tables of a PostgreSQL database and their columns' types, read from ``pg_catalog``.

A domain's column is listed with its base type (``CREATE DOMAIN posint AS integer`` reads as
``integer``, a domain over a domain as the type at the bottom), so it is read as that type. The
whole catalog is read once at attach; each statement reads the rows of the tables it names
again (:func:`list_tables` with ``only``), so a table created, dropped or altered in PostgreSQL
after the attach is read as it is now.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from duckdb_sem.errors import BackendUnavailableError
from duckdb_sem.identifiers import quote_qualified
from duckdb_sem.pg.reader import PgColumn

__all__ = ["PgTable", "list_tables"]

_LIST_SQL = """
WITH RECURSIVE base(oid, typid, typmod) AS (
    SELECT t.oid, t.oid, -1 FROM pg_catalog.pg_type t WHERE t.typtype <> 'd'
    UNION ALL
    SELECT d.oid, b.typid, CASE WHEN d.typtypmod >= 0 THEN d.typtypmod ELSE b.typmod END
    FROM pg_catalog.pg_type d JOIN base b ON b.oid = d.typbasetype WHERE d.typtype = 'd'
)
SELECT n.nspname, c.relname, a.attname, pg_catalog.format_type(
    b.typid, CASE WHEN b.typid = a.atttypid THEN a.atttypmod ELSE b.typmod END)
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
JOIN base b ON b.oid = a.atttypid
WHERE c.relkind IN ('r', 'v', 'm', 'p', 'f')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%%'
  AND (%(schema)s::text IS NULL OR (lower(n.nspname) = %(schema)s AND lower(c.relname) = %(name)s))
ORDER BY n.nspname, c.relname, a.attnum
"""


@dataclass(frozen=True, slots=True)
class PgTable:
    schema: str
    name: str
    columns: tuple[PgColumn, ...]

    @property
    def sql(self) -> str:
        return quote_qualified(self.schema, self.name)


def list_tables(
    conn: psycopg.Connection[tuple[object, ...]], *, only: tuple[str, str] | None = None
) -> dict[tuple[str, str], PgTable]:
    """Tables by lower-cased ``(schema, name)``: all of them, or the one ``only`` names."""
    schema, name = only if only is not None else (None, None)
    try:
        rows = conn.execute(_LIST_SQL, {"schema": schema, "name": name}).fetchall()
    except psycopg.Error as err:
        raise BackendUnavailableError(
            f"cannot read the catalog of PostgreSQL: {str(err).splitlines()[0]}"
        ) from None
    grouped: dict[tuple[str, str], list[PgColumn]] = {}
    for table_schema, table_name, column, pg_type in rows:
        key = (str(table_schema), str(table_name))
        grouped.setdefault(key, []).append(PgColumn(str(column), str(pg_type)))
    return {(s.lower(), n.lower()): PgTable(s, n, tuple(cols)) for (s, n), cols in grouped.items()}
