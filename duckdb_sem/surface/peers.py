"""Other systems' semantic calls, with their own arguments, rewritten to duckdb-sem's calls.

:mod:`.aliases` renames a call whose arguments are already ours; this module rewrites a call
whose arguments are the peer's: Snowflake's ``AI_FILTER(PROMPT('Is {0} spam?', body))``,
BigQuery's ``AI.IF(('Is this spam? ', body))``, Flock's
``llm_filter({'model_name': 'm'}, {'prompt': 'Is this spam?', 'context_columns': [{'data': body}]})``
all become ``sem_filter('Is {0} spam?', body)`` (or the like), so each plans, caches and
schedules as the ``sem_*`` call it becomes. The table of peers is :data:`PEERS` (one function
per peer call, in :mod:`.peer_calls`); docs/migrating.md says what each becomes.

Each call is found by sqlglot's tokenizer (a string, a comment or a quoted column named
``ai_filter`` is left alone), its text alone is parsed by sqlglot, and the replacement is spliced
back: the rest of the statement keeps its exact text. Calls nested in a peer call's arguments
are rewritten first. A peer call whose arguments are already ours (a ``{column}`` template
first) is left for :func:`~.aliases.normalize_aliases` to rename.

Example:
    >>> rewrite_peers("SELECT * FROM t WHERE AI_FILTER(PROMPT('Is {0} spam?', body))")
    "SELECT * FROM t WHERE sem_filter('Is {0} spam?', body)"
"""

from __future__ import annotations

import re
from collections.abc import Collection

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError, TokenError
from sqlglot.tokenizer_core import Token, TokenType

from duckdb_sem.errors import BindError
from duckdb_sem.surface.peer_args import PeerCall
from duckdb_sem.surface.peer_calls import PEERS

__all__ = ["PEERS", "find_peer_calls", "rewrite_peers"]

_NAMES = "|".join(sorted({name.split(".")[-1] for name in PEERS}, key=len, reverse=True))
_QUICK = re.compile(r"\b(?:" + _NAMES + r")\s*\(", re.IGNORECASE)


def rewrite_peers(sql: str, *, models: Collection[str] | None = None) -> str:
    """``sql`` with every peer-shaped call rewritten to duckdb-sem's (else unchanged).

    ``models``: the connection's model names, so that a peer's model argument naming one of
    them is kept (``model := 'fast'``); any other model name runs on the connection's backend.
    """
    if _QUICK.search(sql) is None:
        return sql
    try:
        tokens = sqlglot.tokenize(sql, dialect="duckdb")
    except TokenError:
        return sql  # DuckDB reports the malformed SQL itself
    if tokens and tokens[0].token_type == TokenType.COMMAND:
        cut = tokens[0].end + 1  # EXPLAIN ...: the tokenizer keeps the rest as one string
        return sql[:cut] + rewrite_peers(sql[cut:], models=models)
    out: list[str] = []
    at = i = 0
    while i < len(tokens):
        found = _peer_at(sql, tokens, i)
        if found is None:
            i += 1
            continue
        name, paren = found
        close = _closing(tokens, paren)
        if close is None:
            break  # unbalanced: DuckDB's parser says so
        given = sql[tokens[paren].end + 1 : tokens[close].start]
        inner = rewrite_peers(given, models=models)
        written = sql[tokens[i].start : tokens[close].end + 1]
        replaced = _rewrite(name, written, inner, models)
        if replaced is None and inner != given:  # our arguments, with a peer call inside
            replaced = sql[tokens[i].start : tokens[paren].end + 1] + inner + ")"
        if replaced is not None:
            out.append(sql[at : tokens[i].start])
            out.append(replaced)
            at = tokens[close].end + 1
        i = close + 1
    out.append(sql[at:])
    return "".join(out)


def _peer_at(sql: str, tokens: list[Token], i: int) -> tuple[str, int] | None:
    """(peer name, index of its ``(``) when a peer call starts at token ``i``."""
    token = tokens[i]
    if sql[token.start : token.end + 1].lower() != token.text.lower():
        return None  # a quoted identifier is a column, not a call
    if i > 0 and tokens[i - 1].token_type == TokenType.DOT:
        return None  # t.ai_filter(...) or the second half of AI.IF
    word = token.text.lower()
    if (
        word == "ai"
        and i + 3 < len(tokens)
        and tokens[i + 1].token_type == TokenType.DOT
        and f"ai.{tokens[i + 2].text.lower()}" in PEERS
        and tokens[i + 3].token_type == TokenType.L_PAREN
    ):
        return f"ai.{tokens[i + 2].text.lower()}", i + 3
    if (
        word in PEERS
        and token.token_type == TokenType.VAR
        and i + 1 < len(tokens)
        and tokens[i + 1].token_type == TokenType.L_PAREN
    ):
        return word, i + 1
    return None


def _closing(tokens: list[Token], paren: int) -> int | None:
    depth = 0
    for j in range(paren, len(tokens)):
        kind = tokens[j].token_type
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return j
    return None


def find_peer_calls(sql: str) -> list[tuple[str, PeerCall]]:
    """Every peer call of ``sql``, outermost first, as (name in :data:`PEERS`, parsed call):
    what ``install(con)``'s macros read of the statement's text (:mod:`.peer_prompts`)."""
    if _QUICK.search(sql) is None:
        return []
    try:
        tokens = sqlglot.tokenize(sql, dialect="duckdb")
    except TokenError:
        return []
    found: list[tuple[str, PeerCall]] = []
    for i in range(len(tokens)):
        at = _peer_at(sql, tokens, i)
        close = None if at is None else _closing(tokens, at[1])
        if at is None or close is None:
            continue
        written = sql[tokens[i].start : tokens[close].end + 1]
        inner = sql[tokens[at[1]].end + 1 : tokens[close].start]
        call = _parsed(at[0], written, inner)
        if call is not None:
            found.append((at[0], call))
    return found


def _rewrite(name: str, written: str, inner: str, models: Collection[str] | None) -> str | None:
    """The replacement of one call (its argument text ``inner`` already rewritten)."""
    call = _parsed(name, written, inner)
    return None if call is None else PEERS[name](call, models)


def _parsed(name: str, written: str, inner: str) -> PeerCall | None:
    """The call's arguments as sqlglot reads them (None: not a call DuckDB would parse)."""
    peer = _spelled(name, written)
    try:
        node = sqlglot.parse_one(f"SELECT __peer({inner})", dialect="duckdb")
    except SqlglotError:
        return None  # DuckDB's parser says best what is wrong
    call = node.expressions[0] if isinstance(node, exp.Select) else None
    if not isinstance(call, exp.Anonymous):
        return None
    args: list[exp.Expression] = []
    named: list[tuple[str, exp.Expression]] = []
    for arg in call.expressions:
        if isinstance(arg, exp.Kwarg | exp.PropertyEQ):
            named.append((arg.this.name.lower(), arg.expression))
        elif named:
            raise BindError(f"{peer}: a positional argument follows a named one in {written}")
        else:
            args.append(arg)
    return PeerCall(peer, tuple(args), tuple(named))


def _spelled(name: str, written: str) -> str:
    """The peer's name as the user wrote it (``AI.IF``, ``ai_filter``), for messages."""
    head = written.split("(", 1)[0].strip()
    return re.sub(r"\s+", "", head) or name
