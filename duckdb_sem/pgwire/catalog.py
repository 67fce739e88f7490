"""Small textual rewrites so the catalog queries PostgreSQL clients send run on DuckDB.

DuckDB 2.x ships ``pg_catalog`` views (``pg_class``, ``pg_namespace``, ``pg_attribute``...)
and several ``pg_*`` functions; what remains are spellings DuckDB does not accept. Each rewrite
is one regular expression, listed in ``REWRITES`` with the client that needs it.

Result columns are named as PostgreSQL names them (:func:`column_name`): a function call after
its function (``version``, ``current_setting``, ``count``), not after its text.

Example:
    ``SELECT pg_catalog.version()`` becomes ``SELECT __pg_version()`` (a macro of
    :mod:`.catalog_macros`), and its column is named ``version``.
"""

from __future__ import annotations

import re

import duckdb

from duckdb_sem.pgwire.array_literals import rewrite_array_literals
from duckdb_sem.pgwire.bytea_literals import rewrite_bytea_literals
from duckdb_sem.pgwire.catalog_macros import COMPAT_MACROS, SERVER_VERSION, settings_macro
from duckdb_sem.pgwire.catalog_views import COMPAT_VIEWS
from duckdb_sem.pgwire.commands import SESSION_DEFAULTS
from duckdb_sem.pgwire.lexer import mask_strings, unmask

__all__ = [
    "COMPAT_MACROS",
    "REWRITES",
    "SERVER_VERSION",
    "column_name",
    "install_compat",
    "rewrite_catalog",
]

_I = re.IGNORECASE
REWRITES: tuple[tuple[re.Pattern[str], str], ...] = (
    # every client: the server's version string
    (re.compile(r"\b(?:pg_catalog\.)?version\(\s*\)", _I), "__pg_version()"),
    # Grafana, SQLAlchemy, JDBC: PostgreSQL's settings (DuckDB's current_setting lacks them)
    (re.compile(r"\b(?:pg_catalog\.)?current_setting\s*\(", _I), "__pg_setting("),
    # 'name'::regclass is the relation's oid, compared with catalog oids (::oid: the same)
    (
        re.compile(
            r"(__dsem_str_\d+__)\s*::\s*(?:pg_catalog\.)?regclass\b"
            r"(?:\s*::\s*(?:pg_catalog\.)?oid\b)?",
            _I,
        ),
        r"__pg_regclass(\1)",
    ),
    # psql \dt: catalog functions qualified with pg_catalog that exist here as macros
    (re.compile(r"\bpg_catalog\.(" + "|".join(COMPAT_MACROS) + r")\s*\(", _I), r"\1("),
    # psql \d: DuckDB functions and types spelled with pg_catalog
    (re.compile(r"\bpg_catalog\.(generate_series|array_to_string|unnest)\s*\(", _I), r"\1("),
    (re.compile(r"::\s*pg_catalog\.(\w+)", _I), r"::\1"),
    # SQLAlchemy, psql: type names as PostgreSQL spells them
    (re.compile(r"\b(?:pg_catalog\.)?format_type\s*\(", _I), "__format_type("),
    # SQLAlchemy column reflection (in branches that never run here)
    (re.compile(r"\b(?:pg_catalog\.)?json_build_object\s*\(", _I), "json_object("),
    # SQLAlchemy: columns qualified as pg_catalog.pg_x.col (DuckDB binds them as pg_x.col)
    (re.compile(r"\bpg_catalog\.(pg_\w+)\.(\w+)\b(?!\s*\()", _I), r"\1.\2"),
    # psql \d, SQLAlchemy: regex match operator spelled as OPERATOR(pg_catalog.~)
    (re.compile(r"OPERATOR\(pg_catalog\.(~\*?|!~\*?)\)", _I), r"\1"),
    # psql: COLLATE pg_catalog.default
    (re.compile(r"\s+COLLATE\s+pg_catalog\.default\b", _I), ""),
    # SQLAlchemy, psql: casts to catalog pseudo types
    (
        re.compile(
            r"(::\s*|\bAS\s+)(?:pg_catalog\.)?(?:regclass|regtype|regproc|regnamespace)\b", _I
        ),
        r"\1VARCHAR",
    ),
)


# psql \d, SQLAlchemy, postgres_fdw IMPORT FOREIGN SCHEMA: catalog tables DuckDB lacks or
# lacks columns of read the views of catalog_views.py (a table reference keeps its alias)
_VIEW_REF = re.compile(
    r"(\bFROM|\bJOIN|,)\s+(?:pg_catalog\.)?(" + "|".join(COMPAT_VIEWS) + r")\b(?!\.)"
    r"(\s+(?:AS\s+)?(\w+))?",
    _I,
)
_KEYWORDS = {"join", "where", "left", "right", "inner", "full", "cross", "on", "order", "group", "natural",
             "limit", "union", "except", "intersect", "having", "using", "window", "offset"}  # fmt: skip


def _view_ref(match: re.Match[str]) -> str:
    keyword, table, alias = match.group(1), match.group(2).lower(), match.group(4)
    if alias and alias.lower() not in _KEYWORDS:
        return f"{keyword} __{table} AS {alias}"
    return f"{keyword} __{table} AS {table}{match.group(3) or ''}"


def rewrite_catalog(sql: str) -> str:
    """``sql`` with the rewrites applied outside its string constants (templates stay as typed)."""
    lowered = sql.lower()
    if (
        "pg_" not in sql
        and "version" not in lowered
        and "::" not in sql
        and "setting" not in lowered
        and "{" not in sql
        and "bytea" not in lowered
        and "decode" not in lowered
    ):
        return sql
    masked, strings = mask_strings(sql)
    for pattern, replacement in REWRITES:
        masked = pattern.sub(replacement, masked)
    masked = rewrite_array_literals(masked, strings)  # postgres_fdw: '{1,2}'::bigint[]
    masked = rewrite_bytea_literals(masked, strings)  # '\x00ff'::bytea: PostgreSQL's bytes
    # A reference without alias keeps the keyword after it, which may start the next one.
    while (again := _VIEW_REF.sub(_view_ref, masked)) != masked:
        masked = again
    return unmask(masked, strings)


def install_compat(con: duckdb.DuckDBPyConnection) -> None:
    """Create :data:`COMPAT_MACROS` and the compat views as TEMP objects of ``con``."""
    for name, body in COMPAT_MACROS.items():
        con.execute(f"CREATE OR REPLACE TEMP MACRO {name}{body}")
    con.execute(settings_macro(SESSION_DEFAULTS))
    for name, select in COMPAT_VIEWS.items():
        con.execute(f"CREATE OR REPLACE TEMP VIEW __{name} AS {select}")


# names DuckDB gives a call's column that PostgreSQL gives another (after the rewrites here)
_CALL_NAMES = {
    "count_star": "count",
    "__pg_version": "version",
    "__pg_setting": "current_setting",
    "__format_type": "format_type",
    "__pg_regclass": "regclass",
}
_CALL = re.compile(r"^(?:\w+\.)*(\w+)\((.*)\)$", re.DOTALL)


_LITERAL = re.compile(r"^(?:'.*'|-?\d+(?:\.\d*)?|NULL|true|false)$", re.DOTALL | re.IGNORECASE)


def column_name(name: str) -> str:
    """A result column's name as PostgreSQL gives it: a bare function call (``version()``,
    ``count_star()``, ``current_setting('x')``) is named after its function; an operator
    expression (DuckDB names it ``(a + b)``) or a constant ``?column?``; others as DuckDB
    named them (an alias keeps its name, unless it is spelled as one of these)."""
    if _LITERAL.match(name) or (name[:1] == "(" and name[-1:] == ")" and _balanced(name[1:-1])):
        return "?column?"
    match = _CALL.match(name)
    if match is None or not _balanced(match.group(2)):
        return name
    function = match.group(1)
    return _CALL_NAMES.get(function.lower(), function)


def _balanced(args: str) -> bool:
    """Whether ``args`` is one call's argument list (``f(a) + g(b)`` is not one call)."""
    depth, quote = 0, ""
    for ch in args:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0
