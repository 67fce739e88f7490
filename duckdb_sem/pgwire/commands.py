"""Statements the wire session answers itself instead of passing them to DuckDB.

PostgreSQL clients send session commands DuckDB does not know or must not run (``SET
search_path = pg_catalog``, ``SHOW transaction isolation level``, ``START TRANSACTION ISOLATION
LEVEL REPEATABLE READ``, ``DECLARE c1 CURSOR FOR ...``, ``FETCH 100 FROM c1``). They are
recognised here and returned as small command values; the session executes them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from duckdb_sem.pgwire.lexer import strip_comments

__all__ = [
    "Begin",
    "Close",
    "Command",
    "CopyIn",
    "CopyOut",
    "Deallocate",
    "Declare",
    "End",
    "ExplainSemantic",
    "Fetch",
    "Ignore",
    "Release",
    "Reset",
    "RollbackToSavepoint",
    "Savepoint",
    "Set",
    "SetTransaction",
    "Show",
    "parse_command",
]


@dataclass(frozen=True, slots=True)
class Set:
    name: str
    value: str
    local: bool = False  # SET LOCAL: until the end of the transaction


@dataclass(frozen=True, slots=True)
class Reset:
    name: str  # "all" resets everything


@dataclass(frozen=True, slots=True)
class Show:
    name: str


@dataclass(frozen=True, slots=True)
class Begin:
    tag: str = "BEGIN"  # PostgreSQL answers START TRANSACTION with its own words
    #: the isolation level asked for, lower case (``""``: none named)
    isolation: str = ""


@dataclass(frozen=True, slots=True)
class SetTransaction:
    """``SET [SESSION CHARACTERISTICS AS] TRANSACTION ...``: answered ``SET``; the level
    asked for (``""``: none named) is reported against the one DuckDB gives."""

    isolation: str = ""


@dataclass(frozen=True, slots=True)
class End:
    commit: bool


@dataclass(frozen=True, slots=True)
class Savepoint:
    name: str


@dataclass(frozen=True, slots=True)
class Release:
    name: str


@dataclass(frozen=True, slots=True)
class RollbackToSavepoint:
    """Undo what ran after savepoint ``name`` (see :mod:`.transaction`)."""

    name: str


@dataclass(frozen=True, slots=True)
class Deallocate:
    name: str | None  # None: ALL


@dataclass(frozen=True, slots=True)
class Declare:
    name: str
    query: str


@dataclass(frozen=True, slots=True)
class Fetch:
    name: str
    count: int | None  # None: ALL
    move: bool  # MOVE skips rows instead of returning them


@dataclass(frozen=True, slots=True)
class Close:
    name: str  # "all" closes every cursor


@dataclass(frozen=True, slots=True)
class CopyOut:
    """``COPY (query) TO STDOUT ...`` or ``COPY table [(cols)] TO STDOUT ...``."""

    query: str
    options: str


@dataclass(frozen=True, slots=True)
class CopyIn:
    """``COPY ... FROM STDIN``: refused, with what to do instead."""


@dataclass(frozen=True, slots=True)
class ExplainSemantic:
    """``EXPLAIN [ANALYZE] SEMANTIC [VERBOSE] query``: the connection's plan text, one row a line."""

    query: str
    analyze: bool
    verbose: bool


@dataclass(frozen=True, slots=True)
class Ignore:
    """Accepted and answered with ``tag``, nothing to do (LISTEN, DISCARD...)."""

    tag: str


Command = (
    Set | Reset | Show | Begin | End | Savepoint | Release | RollbackToSavepoint | Deallocate
    | Declare | Fetch | Close | CopyOut | CopyIn | ExplainSemantic | Ignore
    | SetTransaction
)  # fmt: skip

_FLAGS = re.IGNORECASE | re.DOTALL
_NAME = r'(?P<name>"(?:[^"]|"")+"|\w+)'
_SET = re.compile(
    r"^SET\s+(?:SESSION\s+|(?P<local>LOCAL)\s+)?(?P<name>[\w.]+)\s*(?:=|\bTO\b)\s*(?P<v>.*)$",
    _FLAGS,
)
_SET_TZ = re.compile(r"^SET\s+(?:SESSION\s+|(?P<local>LOCAL)\s+)?TIME\s+ZONE\s+(?P<v>.*)$", _FLAGS)
_SET_TX = re.compile(r"^SET\s+(?:SESSION\s+CHARACTERISTICS\s+AS\s+)?TRANSACTION\b", _FLAGS)
_EXPLAIN_SEMANTIC = re.compile(
    r"^EXPLAIN\s+(?P<a>ANALY[SZ]E\s+)?SEMANTIC\s+(?P<v>VERBOSE\s+)?(?P<q>.+?);?\s*$", _FLAGS
)
_RESET = re.compile(r"^RESET\s+(?P<name>[\w.]+)$", _FLAGS)
_SHOW = re.compile(r"^SHOW\s+(?P<name>[\w. ]+)$", _FLAGS)
_BEGIN = re.compile(r"^(BEGIN|START\s+TRANSACTION)\b", _FLAGS)
_ISOLATION = re.compile(
    r"\bISOLATION\s+LEVEL\s+(?P<level>SERIALIZABLE|REPEATABLE\s+READ|READ\s+COMMITTED|"
    r"READ\s+UNCOMMITTED)\b",
    _FLAGS,
)
_END = re.compile(
    r"^(?P<w>COMMIT|END|ROLLBACK|ABORT)(\s+(WORK|TRANSACTION))?(\s+AND\s+NO\s+CHAIN)?$", _FLAGS
)
_ROLLBACK_TO = re.compile(
    r"^ROLLBACK\s+(?:WORK\s+|TRANSACTION\s+)?TO\s+(?:SAVEPOINT\s+)?" + _NAME + "$", _FLAGS
)
_SAVEPOINT = re.compile(r"^SAVEPOINT\s+" + _NAME + "$", _FLAGS)
_RELEASE = re.compile(r"^RELEASE\s+(?:SAVEPOINT\s+)?" + _NAME + "$", _FLAGS)
_DEALLOCATE = re.compile(r"^DEALLOCATE\s+(?:PREPARE\s+)?" + _NAME + "$", _FLAGS)
_DECLARE = re.compile(
    r"^DECLARE\s+" + _NAME + r"\s+(?:BINARY\s+)?(?:INSENSITIVE\s+)?(?:NO\s+)?(?:SCROLL\s+)?"
    r"CURSOR\s+(?:(?:WITH|WITHOUT)\s+HOLD\s+)?FOR\s+(?P<q>.*)$",
    _FLAGS,
)
_FETCH = re.compile(
    r"^(?P<verb>FETCH|MOVE)\s+(?:(?:FORWARD|NEXT)\s+)?(?P<n>ALL|\d+)?\s*(?:FROM\s+|IN\s+)?"
    + _NAME
    + "$",
    _FLAGS,
)
_COPY_OUT = re.compile(
    r"^COPY\s+(?:\((?P<q>.+)\)|(?P<t>[\w.\"]+)\s*(?:\((?P<cols>[^)]*)\))?)\s+TO\s+STDOUT\b(?P<o>.*)$",
    _FLAGS,
)
_COPY_IN = re.compile(r"^COPY\s+.+\s+FROM\s+STDIN\b", _FLAGS)
_CLOSE = re.compile(r"^CLOSE\s+" + _NAME + "$", _FLAGS)
_IGNORED = {
    "discard": "DISCARD ALL",
    "listen": "LISTEN",
    "unlisten": "UNLISTEN",
}
#: SQL-standard spellings of SHOW names (pgcli's first query is ``show time zone``)
_SHOW_ALIASES = {"time zone": "timezone"}
#: the isolation DuckDB gives every transaction: snapshot isolation with write-write conflict
#: detection, which is PostgreSQL's REPEATABLE READ (write skew is not detected)
ISOLATION = "repeatable read"
#: SHOW names the session answers; anything else (SHOW TABLES...) goes to DuckDB
SESSION_DEFAULTS = {
    "server_version": "15.0",
    "server_version_num": "150000",
    "server_encoding": "UTF8",
    "client_encoding": "UTF8",
    "datestyle": "ISO, MDY",
    "intervalstyle": "postgres",
    "timezone": "UTC",
    "integer_datetimes": "on",
    "standard_conforming_strings": "on",
    "search_path": '"$user", public',
    "application_name": "",
    "extra_float_digits": "1",
    "transaction_isolation": ISOLATION,
    "transaction isolation level": ISOLATION,
    "default_transaction_isolation": ISOLATION,
    "default_transaction_read_only": "off",
    "transaction_read_only": "off",
    "is_superuser": "off",
    "lc_collate": "C",
    "lc_ctype": "C",
    "max_identifier_length": "63",
    "statement_timeout": "0",
    "lock_timeout": "0",
    "idle_in_transaction_session_timeout": "0",
    "bytea_output": "hex",
}


def _isolation(text: str) -> str:
    match = _ISOLATION.search(text)
    return " ".join(match["level"].lower().split()) if match else ""


def _ident(name: str) -> str:
    if len(name) >= 2 and name[0] == name[-1] == '"':
        return name[1:-1].replace('""', '"')
    return name.lower()


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    return value


def parse_command(sql: str) -> Command | None:
    """The session command ``sql`` is, or None when DuckDB should run it."""
    text = strip_comments(sql)
    head = text.split(None, 1)[0].lower() if text else ""
    if head == "set":
        if match := _SET_TZ.match(text):
            return Set("timezone", _unquote(match["v"]), local=bool(match["local"]))
        if _SET_TX.match(text):
            return SetTransaction(_isolation(text))
        if match := _SET.match(text):
            return Set(match["name"].lower(), _unquote(match["v"]), local=bool(match["local"]))
    elif head == "reset" and (match := _RESET.match(text)):
        return Reset(match["name"].lower())
    elif head == "show" and (match := _SHOW.match(text)):
        name = " ".join(match["name"].lower().split())
        name = _SHOW_ALIASES.get(name, name)
        if name in SESSION_DEFAULTS or name == "all" or "." in name:
            return Show(name)
    elif head in {"begin", "start"} and _BEGIN.match(text):
        return Begin("BEGIN" if head == "begin" else "START TRANSACTION", _isolation(text))
    elif head == "rollback" and (match := _ROLLBACK_TO.match(text)):
        return RollbackToSavepoint(_ident(match["name"]))
    elif head == "savepoint" and (match := _SAVEPOINT.match(text)):
        return Savepoint(_ident(match["name"]))
    elif head == "release" and (match := _RELEASE.match(text)):
        return Release(_ident(match["name"]))
    elif head == "deallocate" and (match := _DEALLOCATE.match(text)):
        name = _ident(match["name"])
        return Deallocate(None if name == "all" else name)
    elif head in {"commit", "end", "rollback", "abort"} and (match := _END.match(text)):
        return End(commit=match["w"].lower() in {"commit", "end"})
    elif head == "declare" and (match := _DECLARE.match(text)):
        return Declare(_ident(match["name"]), match["q"])
    elif head in {"fetch", "move"} and (match := _FETCH.match(text)):
        count = match["n"]
        number = None if count and count.lower() == "all" else int(count or 1)
        return Fetch(_ident(match["name"]), number, move=match["verb"].lower() == "move")
    elif head == "close" and (match := _CLOSE.match(text)):
        return Close(_ident(match["name"]))
    elif head == "copy" and (match := _COPY_OUT.match(text)):
        query = match["q"] or f"SELECT {match['cols'] or '*'} FROM {match['t']}"
        return CopyOut(query, match["o"])
    elif head == "copy" and _COPY_IN.match(text):
        return CopyIn()
    elif head == "explain" and (match := _EXPLAIN_SEMANTIC.match(text)):
        return ExplainSemantic(match["q"], analyze=bool(match["a"]), verbose=bool(match["v"]))
    elif head in _IGNORED:
        return Ignore(_IGNORED[head])
    return None
