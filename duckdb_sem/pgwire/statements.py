"""What one statement is, as DuckDB's own parser reads it: its kind, rows or not, its tag.

The server never guesses from first words: a statement (one piece from
:func:`~duckdb_sem.pgwire.lexer.split_statements`) is parsed with DuckDB's
``extract_statements``, which skips comments and knows dollar quotes and ``E''`` strings. The
statement type decides whether rows come back (``SELECT``, ``EXPLAIN``, ``CALL``, and any
``INSERT``/``UPDATE``/``DELETE``/``MERGE`` with ``RETURNING``), whether it writes (refused on a
read-only server, replayed by savepoints) and the PostgreSQL command tag.

Example:
    ``parse("/* tag */ INSERT INTO t VALUES (1) RETURNING id")`` is one :class:`Parsed` with
    ``returns_rows`` true and ``row_tag`` ``"INSERT 0"``: after 7 rows the tag is ``INSERT 0 7``.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

import duckdb

from duckdb_sem.pgwire.lexer import strip_comments

__all__ = ["DESCRIBABLE", "WRITE_TYPES", "Parsed", "parse", "prepared_parts"]

T = duckdb.StatementType
_ROW_TYPES = frozenset({T.SELECT, T.EXPLAIN, T.PRAGMA, T.CALL, T.RELATION, T.EXECUTE})
#: statement types whose fields a Describe may compute without running them
DESCRIBABLE = frozenset({T.SELECT, T.EXPLAIN, T.RELATION})
_DML = {T.INSERT: "INSERT 0", T.UPDATE: "UPDATE", T.DELETE: "DELETE", T.MERGE_INTO: "MERGE"}
#: statement types that change a database or the server (refused when read-only)
WRITE_TYPES = frozenset(
    {T.INSERT, T.UPDATE, T.DELETE, T.MERGE_INTO, T.CREATE, T.CREATE_FUNC, T.DROP, T.ALTER,
     T.COPY, T.COPY_DATABASE, T.EXPORT, T.VACUUM, T.ANALYZE, T.ATTACH, T.DETACH, T.LOAD,
     T.EXTENSION}
)  # fmt: skip
_NAME = r'"(?:[^"]|"")+"|[\w$]+'
_PREPARE = re.compile(
    rf"^PREPARE\s+(?P<name>{_NAME})\s*(?:\([^)]*\))?\s+AS\s+(?P<body>.+)$", re.I | re.S
)
_EXPLAIN_ANALYZE = re.compile(
    r"^EXPLAIN\s+(?:ANALYZE\b|\([^)]*\bANALYZE\b[^)]*\))\s*(?P<body>.+)$", re.I | re.S
)
_EXECUTE = re.compile(rf"^EXECUTE\s+(?P<name>{_NAME})", re.I)

_parser = duckdb.connect(":memory:")
_parser_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class Parsed:
    sql: str  # the statement as the client wrote it (comments included)
    type: duckdb.StatementType
    text: str  # without comments, for tags and names
    returning: bool = False
    #: what an ``EXPLAIN ANALYZE`` runs (it writes what its statement writes)
    explained: Parsed | None = None

    @property
    def returns_rows(self) -> bool:
        return self.type in _ROW_TYPES or self.returning

    @property
    def writes(self) -> bool:
        return self.type in WRITE_TYPES or (self.explained is not None and self.explained.writes)

    @property
    def row_tag(self) -> str:
        """The tag's word(s) before the row count (``SELECT 3``, ``INSERT 0 7``)."""
        return _DML.get(self.type, "SELECT")

    def tag(self, count: int | None) -> str:
        """The command tag of a statement that returned no rows (``count``: rows changed)."""
        words = self.text.split()
        head = words[0].upper() if words else ""
        if head == "TRUNCATE":  # DuckDB reads it as a DELETE; PostgreSQL's tag has no count
            return "TRUNCATE TABLE"
        if self.type in _DML:
            return f"{_DML[self.type]} {count or 0}"
        if self.type == T.COPY:
            return f"COPY {count or 0}"
        if head in {"CREATE", "DROP", "ALTER"} and len(words) > 1:
            skip = {"OR", "REPLACE", "TEMP", "TEMPORARY", "UNIQUE", "PERSISTENT"}
            kind = next((w.upper() for w in words[1:] if w.upper() not in skip), "")
            return f"{head} {kind}".strip()
        return head or "OK"

    def name(self) -> str | None:
        """The prepared statement a ``PREPARE`` or ``EXECUTE`` names (folded like PostgreSQL)."""
        match = _PREPARE.match(self.text) or _EXECUTE.match(self.text)
        return _ident(match["name"]) if match else None


def _ident(name: str) -> str:
    if len(name) >= 2 and name[0] == name[-1] == '"':
        return name[1:-1].replace('""', '"')
    return name.lower()


def _has_returning(sql: str) -> bool:
    # DuckDB's tokenizer marks RETURNING as a keyword only outside strings and comments.
    keyword = duckdb.token_type.keyword
    return any(
        kind == keyword and sql[pos : pos + 9].lower() == "returning"
        for pos, kind in duckdb.tokenize(sql)
    )


def parse(sql: str) -> list[Parsed]:
    """The statements in ``sql`` (DuckDB's ``ParserException`` for a syntax error: 42601)."""
    with _parser_lock:
        statements = _parser.extract_statements(sql)
    out = []
    for statement in statements:
        text = str(statement.query)
        returning = statement.type in _DML and _has_returning(text)
        stripped = strip_comments(text)
        explained = None
        if statement.type == T.EXPLAIN and (match := _EXPLAIN_ANALYZE.match(stripped)):
            inner = parse(match["body"])
            explained = inner[0] if len(inner) == 1 else None
        out.append(Parsed(text, statement.type, stripped, returning, explained))
    return out


def prepared_parts(parsed: Parsed) -> tuple[str, Parsed] | None:
    """(name, body) of a ``PREPARE name AS body``, so ``EXECUTE name`` knows what it runs."""
    match = _PREPARE.match(parsed.text)
    if match is None:
        return None
    body = parse(match["body"])
    return (_ident(match["name"]), body[0]) if len(body) == 1 else None
