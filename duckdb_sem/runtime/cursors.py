"""Cursors that see the session as its connection does.

The SEU loop reads and writes through cursors of the user's connection (DuckDB allows one
open result per connection). A DuckDB cursor is a new session of the same database: it starts
from the default settings, so a ``SET TimeZone`` (or ``search_path``, ``Calendar``) made on the
connection would not apply there, and a ``TIMESTAMPTZ`` would render, compare and truncate
differently in a planned query than in the same query on the UDF path. :func:`session_cursor`
copies every setting that differs between the two.
"""

from __future__ import annotations

import contextlib

import duckdb

__all__ = ["session_cursor"]

#: settings about the client's own display or profiling, not what a query means
_SKIP = {"enable_progress_bar", "enable_progress_bar_print", "progress_bar_time"}


def _settings(con: duckdb.DuckDBPyConnection) -> dict[str, str | None]:
    rows = con.execute("SELECT name, value FROM duckdb_settings()").fetchall()
    return {str(name): None if value is None else str(value) for name, value in rows}


def session_cursor(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """A cursor of ``con`` with ``con``'s session settings."""
    cursor = con.cursor()
    mine, fresh = _settings(con), _settings(cursor)
    for name, value in mine.items():
        if name in _SKIP or value is None or fresh.get(name) == value:
            continue
        with contextlib.suppress(duckdb.Error):  # a setting a cursor may not change
            cursor.execute(f'SET "{name}" = $1', [value])
    return cursor
