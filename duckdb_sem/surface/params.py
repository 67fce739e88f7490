"""Bound parameters (``?``, ``$1``) written into a statement as typed SQL literals.

The optimizer plans SQL text; a parameterised statement (every one a Postgres driver sends
through the extended protocol) would otherwise have to take the UDF path. Values of the common
Python types become literals DuckDB reads back as the same value and type (a string is quoted
with its quotes doubled, so a value can never become SQL); for any other type, or placeholders
that do not match the values given, :func:`inline_params` returns None and the statement runs
with DuckDB binding the parameters itself.

Example:
    >>> inline_params("SELECT * FROM t WHERE id = ? AND note = ?", [3, "it's"])
    "SELECT * FROM t WHERE id = 3 AND note = 'it''s'"
"""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from collections.abc import Sequence

import duckdb
import sqlglot
from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.tokenizer_core import TokenType

__all__ = ["inline_into", "inline_params", "literal", "number_placeholders"]


def literal(value: object) -> exp.Expr | None:
    """``value`` as a SQL literal of its type, or None when there is no exact one."""
    if isinstance(value, duckdb.Value):  # a typed parameter (the wire server's)
        return _typed(value.object, str(value.type))
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int):
        return exp.Literal.number(value)
    if isinstance(value, float):
        # as a string: ``-0.0`` and ``nan`` are no numeric literals (DuckDB reads ``-0.0`` as 0)
        return exp.cast(exp.Literal.string(repr(value)), "DOUBLE")
    if isinstance(value, decimal.Decimal):
        return _decimal(value)
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, bytes):
        return exp.cast(exp.Literal.string("".join(f"\\x{b:02X}" for b in value)), "BLOB")
    if isinstance(value, dt.datetime):
        kind = "TIMESTAMPTZ" if value.tzinfo is not None else "TIMESTAMP"
        return exp.cast(exp.Literal.string(value.isoformat(sep=" ")), kind)
    if isinstance(value, dt.date):
        return exp.cast(exp.Literal.string(value.isoformat()), "DATE")
    if isinstance(value, dt.time):
        kind = "TIMETZ" if value.tzinfo is not None else "TIME"
        return exp.cast(exp.Literal.string(value.isoformat()), kind)
    if isinstance(value, dt.timedelta):
        micros = value.seconds * 1_000_000 + value.microseconds
        text = f"{value.days} days {micros} microseconds"
        return exp.cast(exp.Literal.string(text), "INTERVAL")
    if isinstance(value, uuid.UUID):
        return exp.cast(exp.Literal.string(str(value)), "UUID")
    return None


def _decimal(value: decimal.Decimal) -> exp.Expr | None:
    """A DECIMAL of the value's digits, as DuckDB binds a ``Decimal`` (DOUBLE past 38 digits,
    or for NaN and infinities, which DECIMAL lacks)."""
    if not value.is_finite():
        return exp.cast(exp.Literal.string(str(value)), "DOUBLE")
    _, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    scale = max(0, -exponent)
    width = max(len(digits) + max(exponent, 0), scale, 1)
    kind = f"DECIMAL({width}, {scale})" if width <= 38 else "DOUBLE"
    return exp.cast(exp.Literal.string(str(value)), exp.DataType.build(kind, dialect="duckdb"))


def _typed(inner: object, type_text: str) -> exp.Expr | None:
    """``CAST(inner AS type)``; None for a type or value sqlglot cannot write."""
    if inner is None:
        return exp.Null()
    if isinstance(inner, list):
        items = [_typed(x, "") if isinstance(x, list) else literal(x) for x in inner]
        if any(x is None for x in items):
            return None
        value: exp.Expr | None = exp.Array(expressions=items)
    elif isinstance(inner, str | bool | int | float):
        value = exp.Literal.string(inner if isinstance(inner, str) else repr(inner))
        if isinstance(inner, bool):
            value = exp.Boolean(this=inner)
    else:
        value = literal(inner)
    if value is None or not type_text:
        return value
    try:
        kind = exp.DataType.build(type_text, dialect="duckdb")
    except sqlglot.errors.ParseError:
        return None
    return exp.cast(value, kind)


def number_placeholders(sql: str) -> str:
    """``sql`` with each ``?`` written ``$n`` in textual order (strings and comments untouched)."""
    tokens = [t for t in DuckDB().tokenize(sql) if t.token_type == TokenType.PLACEHOLDER]
    out, at, n = [], 0, 0
    for token in tokens:
        if token.text != "?":
            continue
        n += 1
        out.append(sql[at : token.start])
        out.append(f"${n}")
        at = token.end + 1
    out.append(sql[at:])
    return "".join(out)


def inline_params(sql: str, params: Sequence[object]) -> str | None:
    """``sql`` with its placeholders replaced by ``params`` as literals (None: cannot)."""
    try:
        tree = sqlglot.parse_one(number_placeholders(sql), dialect="duckdb")
    except sqlglot.errors.ParseError:
        return None
    inlined = inline_into(tree, params)
    if inlined is None:
        return None
    out: str = inlined.sql(dialect="duckdb", normalize_functions=False)
    return out


def inline_into(tree: exp.Expr, params: Sequence[object]) -> exp.Expr | None:
    """A copy of ``tree`` (placeholders numbered: :func:`number_placeholders`) with each
    ``$n`` replaced by the literal of ``params[n-1]``; None when that cannot be done exactly."""
    values = [literal(v) for v in params]
    if any(v is None for v in values):
        return None
    tree = tree.copy()
    used: set[int] = set()
    for holder in list(tree.find_all(exp.Placeholder)):
        if holder.this is None or not str(holder.this).isdigit():
            return None  # ``?`` mixed with ``$n``, or a named parameter
        index = int(str(holder.this)) - 1
        if not 0 <= index < len(values):
            return None
        replacement = values[index]
        raw = params[index]
        if isinstance(holder.parent, exp.Limit | exp.Offset) and isinstance(raw, duckdb.Value):
            # a count, not a typed value: the planner stops early on a literal LIMIT
            replacement = literal(raw.object)
        assert replacement is not None
        holder.replace(replacement.copy())
        used.add(index)
    if used != set(range(len(values))):
        return None
    return tree
