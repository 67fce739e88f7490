"""Small textual rewrites so the catalog queries PostgreSQL clients send run on DuckDB.

DuckDB 2.x ships ``pg_catalog`` views (``pg_class``, ``pg_namespace``, ``pg_attribute``...)
and several ``pg_*`` functions; what remains are spellings DuckDB does not accept. Each rewrite
is one regular expression, listed in ``REWRITES`` with the client that needs it.

Example:
    ``SELECT pg_catalog.version()`` becomes
    ``SELECT 'PostgreSQL 15.0 (duckdb-sem, DuckDB v2.0.1)'``
"""

from __future__ import annotations

import re

import duckdb

from duckdb_sem.pgwire.catalog_views import COMPAT_VIEWS
from duckdb_sem.pgwire.lexer import mask_strings, unmask

__all__ = ["COMPAT_MACROS", "REWRITES", "SERVER_VERSION", "install_compat", "rewrite_catalog"]

SERVER_VERSION = "15.0"
_VERSION_TEXT = f"PostgreSQL {SERVER_VERSION} (duckdb-sem, DuckDB {duckdb.__version__})"

#: PostgreSQL functions DuckDB lacks, created as macros in the server's in-memory catalog
COMPAT_MACROS = {
    "pg_get_userbyid": "(role_oid) AS 'duckdb'",
    "pg_encoding_to_char": "(encoding) AS 'UTF8'",
    "pg_get_indexdef": "(index_oid) AS '', (index_oid, col, pretty) AS ''",
    "pg_get_expr": "(expr, rel) AS NULL::VARCHAR, (expr, rel, pretty) AS NULL::VARCHAR",
    "pg_get_statisticsobjdef_columns": "(stat_oid) AS NULL",
    "pg_get_partkeydef": "(rel_oid) AS NULL",
    "pg_relation_is_publishable": "(rel_oid) AS false",
    "pg_backend_pid": "() AS 1",
    "pg_get_serial_sequence": "(table_name, column_name) AS NULL::VARCHAR",
    "to_regtype": "(regtype_arg) AS (SELECT min(t.oid) FROM pg_catalog.pg_type t WHERE t.typname = regtype_arg)",
    "txid_current": "() AS 1",
    # current_setting(<parameter>): text, as PostgreSQL's, and PostgreSQL-only names answered
    "__pg_setting": "(setting_name) AS coalesce(CASE WHEN setting_name = "
    "'default_table_access_method' THEN 'heap' END, (SELECT s.setting FROM "
    "pg_catalog.pg_settings s WHERE s.name = setting_name))",
    "array_upper": "(arr, dim) AS len(arr)",
    "pg_get_function_result": "(func_oid) AS NULL::VARCHAR",
    "pg_get_function_arguments": "(func_oid) AS ''",
    "pg_get_function_identity_arguments": "(func_oid) AS ''",
    # PostgreSQL's spelling of type names (SQLAlchemy maps these, not int4/varchar)
    "__format_type": "(type_oid, type_mod) AS (CASE pg_catalog.format_type(type_oid, type_mod) "
    + " ".join(
        f"WHEN '{short}' THEN '{long}'"
        for short, long in {
            "int2": "smallint",
            "int4": "integer",
            "int8": "bigint",
            "float4": "real",
            "float8": "double precision",
            "bool": "boolean",
            "varchar": "character varying",
            "timestamptz": "timestamp with time zone",
        }.items()
    )
    + " ELSE pg_catalog.format_type(type_oid, type_mod) END)",
}

_I = re.IGNORECASE
REWRITES: tuple[tuple[re.Pattern[str], str], ...] = (
    # every client: the server's version string
    (re.compile(r"\b(?:pg_catalog\.)?version\(\s*\)", _I), f"'{_VERSION_TEXT}'"),
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


# SQLAlchemy's table reflection: PostgreSQL settings DuckDB does not have
_SETTING = re.compile(
    r"\b(?:pg_catalog\.)?current_setting\s*\(\s*'default_table_access_method'\s*\)", _I
)
_SETTING_PARAM = re.compile(r"\b(?:pg_catalog\.)?current_setting\s*\(\s*(?=\$\d)", _I)


def _view_ref(match: re.Match[str]) -> str:
    keyword, table, alias = match.group(1), match.group(2).lower(), match.group(4)
    if alias and alias.lower() not in _KEYWORDS:
        return f"{keyword} __{table} AS {alias}"
    return f"{keyword} __{table} AS {table}{match.group(3) or ''}"


def rewrite_catalog(sql: str) -> str:
    """``sql`` with the rewrites applied outside its string constants (templates stay as typed)."""
    if "pg_" not in sql and "version" not in sql.lower() and "::" not in sql:
        return sql
    masked, strings = mask_strings(_SETTING_PARAM.sub("__pg_setting(", _SETTING.sub("'heap'", sql)))
    for pattern, replacement in REWRITES:
        masked = pattern.sub(replacement, masked)
    # A reference without alias keeps the keyword after it, which may start the next one.
    while (again := _VIEW_REF.sub(_view_ref, masked)) != masked:
        masked = again
    return unmask(masked, strings)


def install_compat(con: duckdb.DuckDBPyConnection) -> None:
    """Create :data:`COMPAT_MACROS` and the compat views as TEMP objects of ``con``."""
    for name, body in COMPAT_MACROS.items():
        con.execute(f"CREATE OR REPLACE TEMP MACRO {name}{body}")
    for name, select in COMPAT_VIEWS.items():
        con.execute(f"CREATE OR REPLACE TEMP VIEW __{name} AS {select}")
