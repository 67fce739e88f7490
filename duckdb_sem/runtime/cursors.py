"""Cursors that see the session as its connection does.

The SEU loop reads and writes through cursors of the user's connection (DuckDB allows one
open result per connection). A DuckDB cursor is a new session of the same database: it starts
from the default settings, so a ``SET TimeZone`` (or ``search_path``, ``Calendar``) made on the
connection would not apply there, and a ``TIMESTAMPTZ`` would render, compare and truncate
differently in a planned query than in the same query on the UDF path. :func:`session_cursor`
copies the settings of :data:`SESSION_SETTINGS` that differ between the two.
"""

from __future__ import annotations

import contextlib
import weakref
from typing import Any

import duckdb

__all__ = ["SESSION_SETTINGS", "session_cursor"]

#: the session settings that change what a query means or how a value renders (a DuckDB
#: cursor starts from the defaults for each): copied from the connection to its cursors
SESSION_SETTINGS = (
    "TimeZone",
    "Calendar",
    "search_path",
    "schema",
    "default_collation",
    "default_order",
    "default_null_order",
    "integer_division",
    "preserve_insertion_order",
)
_QUERY = "SELECT " + ", ".join(f"current_setting('{n}')" for n in SESSION_SETTINGS)


def _settings(con: duckdb.DuckDBPyConnection) -> tuple[object, ...]:
    rows = con.execute(_QUERY).fetchall()
    return tuple(rows[0]) if rows else ()


# The settings of each cursor made here, and those a new cursor of it starts from: a cursor
# of a cursor (the SEU loop's reader) then needs no query to learn either.
_known: weakref.WeakKeyDictionary[Any, tuple[tuple[object, ...], tuple[object, ...]]] = (
    weakref.WeakKeyDictionary()
)


def session_cursor(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """A cursor of ``con`` with ``con``'s session settings."""
    cursor = con.cursor()
    known = _known.get(con)
    mine, fresh = known if known is not None else (_settings(con), _settings(cursor))
    for name, value, default in zip(SESSION_SETTINGS, mine, fresh, strict=False):
        if value is None or value == default:
            continue
        with contextlib.suppress(duckdb.Error):  # a setting a cursor may not change
            cursor.execute(f'SET "{name}" = $1', [str(value)])
    _known[cursor] = (mine, fresh)
    return cursor
