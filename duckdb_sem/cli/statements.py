"""Where the SQL of ``duckdb-sem query`` comes from, and how it is cut into statements.

SQL is read from the argument, from a file (``-f file.sql``) or from stdin (``-`` or piped), and
split at top-level semicolons found by sqlglot's tokenizer, so a ``;`` inside a string, a
quoted identifier, a ``$$ ... $$`` string or a comment does not split. Each piece keeps its own
text as written (statements duckdb-sem handles itself, such as ``EXPLAIN SEMANTIC`` or
``SET duckdb_sem.*``, need not be standard SQL); pieces holding only comments are dropped.

Example:
    >>> split_statements("SELECT 'a;b'; -- done;\\nSELECT 2;")
    ["SELECT 'a;b'", '-- done;\\nSELECT 2']
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot.errors import TokenError
from sqlglot.tokenizer_core import TokenType

from duckdb_sem.errors import BindError

__all__ = ["reads_rows", "split_statements"]

#: first words of statements whose result is rows even when there are none
_QUERIES = frozenset(
    {"select", "with", "from", "values", "table", "explain", "show", "describe", "summarize",
     "pragma", "call", "pivot", "unpivot", "("}
)  # fmt: skip


def split_statements(sql: str) -> list[str]:
    """The statements of ``sql`` in order, each stripped, none empty."""
    try:
        tokens = sqlglot.tokenize(sql, dialect="duckdb")
    except TokenError as err:
        raise BindError(f"cannot read the SQL (an unclosed string or comment?): {err}") from None
    out: list[str] = []
    start = 0
    has_token = False
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            if has_token:
                out.append(sql[start : token.start].strip())
            start, has_token = token.end + 1, False
        else:
            has_token = True
    if has_token:
        out.append(sql[start:].strip())
    return out


def reads_rows(statement: str) -> bool:
    """Whether ``statement`` is a query (its empty result is still a result to show), judged
    by its first word; DDL, DML and SET answer with a status DuckDB's shell does not print."""
    for word in re.findall(r"\(|[A-Za-z_]+", _strip_comments(statement))[:1]:
        return word.lower() in _QUERIES
    return False


def _strip_comments(sql: str) -> str:
    return re.sub(r"--[^\n]*|/\*.*?\*/", " ", sql, flags=re.S)
