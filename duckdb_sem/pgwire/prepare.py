"""``PREPARE name(type, ...) AS statement``: the parameter types written into the statement.

DuckDB's ``PREPARE`` takes no type list (0A000). As in PostgreSQL, a declared type is the
parameter's type, so each ``$n`` of the statement becomes ``CAST($n AS type)`` and the type list
is dropped; ``EXECUTE name(...)`` then binds and converts its arguments to those types.
Placeholders in string constants are left alone.

Example: ``PREPARE p(int, text) AS SELECT $1 + 1, $2`` becomes
``PREPARE p AS SELECT CAST($1 AS int) + 1, CAST($2 AS text)``.
"""

from __future__ import annotations

import re

from duckdb_sem.pgwire.lexer import mask_strings, strip_comments, unmask

__all__ = ["typed_prepare"]

_PREPARE = re.compile(
    r"^\s*PREPARE\s+(?P<name>\"(?:[^\"]|\"\")+\"|\w+)\s*\((?P<types>.*?)\)\s*AS\s+(?P<body>.*)$",
    re.IGNORECASE | re.DOTALL,
)
_PLACEHOLDER = re.compile(r"\$(\d+)\b")


def typed_prepare(sql: str) -> str:
    """``sql`` without its PREPARE type list, the types cast onto the placeholders (other
    statements unchanged)."""
    if not sql.lstrip()[:7].upper().startswith("PREPARE"):
        return sql
    masked, strings = mask_strings(strip_comments(sql))
    match = _PREPARE.match(masked)
    if match is None or not _balanced(match["types"]):
        return sql
    types = _split(match["types"])

    def cast(found: re.Match[str]) -> str:
        index = int(found.group(1)) - 1
        if 0 <= index < len(types):
            return f"CAST({found.group(0)} AS {types[index]})"
        return found.group(0)

    body = _PLACEHOLDER.sub(cast, match["body"])
    return unmask(f"PREPARE {match['name']} AS {body}", strings)


def _balanced(text: str) -> bool:
    return text.count("(") == text.count(")")


def _split(types: str) -> list[str]:
    """``int, numeric(10, 2), text[]`` into its types (commas inside parentheses kept)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(types):
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            out.append(types[start:i].strip())
            start = i + 1
    out.append(types[start:].strip())
    return [t for t in out if t]
