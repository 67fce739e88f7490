"""PostgreSQL array literals (``'{1,2,3}'::bigint[]``) and untyped array parameters for DuckDB.

DuckDB casts ``'[1, 2, 3]'`` to a list but not PostgreSQL's ``'{1,2,3}'``, which postgres_fdw
sends for every ``IN (...)`` filter (``col = ANY ('{1,2,3}'::bigint[])``) and psql, pg_dump and
ORMs write too. A string constant cast to an array type becomes a DuckDB list of its element
strings, cast to that type, so DuckDB reads each element as it reads a literal of the type.

psycopg 3 sends a list of ``str`` as the text ``{a,b}`` of unknown type (OID 0), which
PostgreSQL types from its use; DuckDB would compare a VARCHAR. So an untyped parameter that is
the operand of ``ANY``/``ALL``/``unnest`` is read as an array of text (:func:`bind_array_params`).

Example:
    ``'{1,NULL,"a b"}'::text[]`` becomes ``CAST(['1', NULL, 'a b'] AS text[])``;
    ``relkind = ANY($1)`` with the untyped ``'{r,p}'`` binds ``['r', 'p']`` (VARCHAR[]).
"""

from __future__ import annotations

import re
from typing import Any

import duckdb
from duckdb import sqltypes as t

from duckdb_sem.pgwire.lexer import constant_value, mask_strings
from duckdb_sem.pgwire.text_input import parse_array

__all__ = ["bind_array_params", "rewrite_array_literals"]

_TYPE = (
    r'(?P<type>(?:"?\w+"?)(?:\s+varying|\s+precision|\s+with(?:out)?\s+time\s+zone)?'
    r"(?:\s*\(\s*\d+(?:\s*,\s*\d+)?\s*\))?)\s*(?P<dims>(?:\[\s*\d*\s*\]\s*)+)"
)
_CAST_OP = re.compile(r"__dsem_str_(?P<n>\d+)__\s*::\s*" + _TYPE, re.I)
_CAST_CALL = re.compile(r"\bCAST\s*\(\s*__dsem_str_(?P<n>\d+)__\s+AS\s+" + _TYPE + r"\)", re.I)
_ARRAY_OPERAND = re.compile(r"\b(?:ANY|ALL|SOME|unnest)\s*\(\s*\$(\d+)\s*\)", re.I)


def _list_sql(items: list[Any], strings: list[str]) -> str:
    parts = []
    for item in items:
        if item is None:
            parts.append("NULL")
        elif isinstance(item, list):
            parts.append(_list_sql(item, strings))
        else:
            parts.append(f"__dsem_str_{len(strings)}__")
            strings.append("'" + str(item).replace("'", "''") + "'")
    return "[" + ", ".join(parts) + "]"


def rewrite_array_literals(masked: str, strings: list[str]) -> str:
    """``masked`` (see :func:`~duckdb_sem.pgwire.lexer.mask_strings`) with each string constant
    cast to an array type written as a DuckDB list; new constants are appended to ``strings``.
    A constant that is not an array literal is left as it is (DuckDB's cast reports it)."""

    def replace(match: re.Match[str]) -> str:
        text = constant_value(strings[int(match["n"])])
        if text is None or not text.lstrip().startswith(("{", "[")):
            return match.group(0)
        try:
            items = parse_array(text)
        except ValueError:
            return match.group(0)
        dims = "[]" * match["dims"].count("[")
        return f"CAST({_list_sql(items, strings)} AS {match['type']}{dims})"

    if "__dsem_str_" not in masked:
        return masked
    masked = _CAST_OP.sub(replace, masked)
    return _CAST_CALL.sub(replace, masked)


def _typed(items: list[Any]) -> Any:
    duck: t.DuckDBPyType = t.VARCHAR
    depth, inner = 1, items
    while inner and isinstance(inner[0], list):
        depth, inner = depth + 1, inner[0]
    for _ in range(depth):
        duck = duckdb.list_type(duck)
    return duckdb.Value(items, duck)


def bind_array_params(sql: str, params: list[Any]) -> list[Any]:
    """``params`` with each untyped (``str``) operand of ``ANY($n)``, ``ALL($n)`` or
    ``unnest($n)`` that is an array literal read as an array of text."""
    if not params or "$" not in sql:
        return params
    masked, _ = mask_strings(sql)
    out = list(params)
    for match in _ARRAY_OPERAND.finditer(masked):
        index = int(match.group(1)) - 1
        value = out[index] if 0 <= index < len(out) else None
        if isinstance(value, str) and value.lstrip().startswith("{"):
            try:
                out[index] = _typed(parse_array(value))
            except ValueError:
                continue  # not an array literal: DuckDB reports its own error
    return out
