"""Other systems' names for the semantic functions, rewritten to duckdb-sem's own.

Users coming from Snowflake Cortex (``AI_FILTER``, ``AI_COMPLETE``, ``AI_AGG``), Flock
(``llm_filter``, ``llm_complete``, ``llm_reduce``) or BigQuery (``AI.IF``, ``AI.GENERATE``,
written ``ai_if`` and ``ai_generate`` here) can call the functions by the name they know, with
duckdb-sem's arguments (a ``{column}`` template first; see docs/migrating.md); calls with the
peer's own arguments are rewritten first by :mod:`.peers`. An alias costs
nothing: it is the same function, so it plans, caches and schedules exactly as the name it
stands for.

:data:`ALIASES` is the one table. :func:`normalize_aliases` renames the calls in a statement's
text before anything else reads it (every ``SemConnection`` statement: the planned path, the
UDF path, the relation API, the wire server), found by sqlglot's tokenizer so that a string, a
comment or a column that happens to be called ``ai_filter`` is left alone; ``install(con)``
also registers each alias as a macro next to the function it stands for.

Example:
    >>> normalize_aliases("SELECT id FROM t WHERE AI_FILTER('{text} is spam')")
    "SELECT id FROM t WHERE sem_filter('{text} is spam')"
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Collection

import sqlglot
from sqlglot.errors import TokenError
from sqlglot.tokenizer_core import TokenType

from duckdb_sem.surface.peers import rewrite_peers

__all__ = ["ALIASES", "normalize_aliases"]

#: alias -> duckdb-sem function; the systems each comes from are in docs/migrating.md
ALIASES: dict[str, str] = {
    "ai_filter": "sem_filter",  # Snowflake Cortex AI_FILTER
    "llm_filter": "sem_filter",  # Flock
    "ai_if": "sem_filter",  # BigQuery AI.IF
    "ai_complete": "sem_map",  # Snowflake Cortex AI_COMPLETE
    "llm_complete": "sem_map",  # Flock
    "ai_generate": "sem_map",  # BigQuery AI.GENERATE
    "ai_agg": "sem_agg",  # Snowflake Cortex AI_AGG
    "llm_reduce": "sem_agg",  # Flock
}

_QUICK = re.compile(r"\b(?:" + "|".join(ALIASES) + r")\s*\(", re.IGNORECASE)


def normalize_aliases(sql: str, *, models: Collection[str] | None = None) -> str:
    """``sql`` with every peer-shaped call rewritten (:func:`~.peers.rewrite_peers`, which
    reads ``models``) and every aliased call renamed to duckdb-sem's function."""
    sql = rewrite_peers(sql, models=models)
    if _QUICK.search(sql) is None:
        return sql
    try:
        tokens = sqlglot.tokenize(sql, dialect="duckdb")
    except TokenError:
        return sql  # DuckDB reports the malformed SQL itself
    if tokens and tokens[0].token_type == TokenType.COMMAND:
        # EXPLAIN ...: the tokenizer keeps the rest as one string; read it on its own
        cut = tokens[0].end + 1
        return sql[:cut] + normalize_aliases(sql[cut:])
    out: list[str] = []
    at = 0
    for token, following in itertools.pairwise(tokens):
        name = ALIASES.get(token.text.lower())
        if (
            name is not None
            and token.token_type == TokenType.VAR
            and following.token_type == TokenType.L_PAREN
            and sql[token.start : token.end + 1].lower() == token.text.lower()  # not quoted
        ):
            out.append(sql[at : token.start])
            out.append(name)
            at = token.end + 1
    out.append(sql[at:])
    return "".join(out)
