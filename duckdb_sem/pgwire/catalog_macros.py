"""PostgreSQL functions DuckDB lacks, as TEMP macros of each session's cursor.

Catalog queries call ``pg_get_userbyid``, ``format_type``, ``current_setting``,
``pg_get_function_arguments``... (psql's backslash commands, SQLAlchemy, Grafana, Metabase).
Each is a macro here, created by :func:`~duckdb_sem.pgwire.catalog.install_compat`; a few are
reached through a rewrite in :mod:`.catalog` (``current_setting`` is ``__pg_setting``, because
DuckDB has a ``current_setting`` of its own that knows no PostgreSQL names).

``current_setting`` answers from the session's variables (what ``SHOW`` shows), so its macro is
made from them: :func:`settings_macro`, created again after each ``SET``/``RESET``.

Example: ``SELECT current_setting('server_version_num')`` returns ``'150000'``, in a column
named ``current_setting``; ``SELECT 'reviews'::regclass::oid`` the table's oid.
"""

from __future__ import annotations

from collections.abc import Mapping

import duckdb

__all__ = ["COMPAT_MACROS", "SEM_RESULTS", "VERSION_TEXT", "settings_macro"]

SERVER_VERSION = "15.0"
VERSION_TEXT = f"PostgreSQL {SERVER_VERSION} (duckdb-sem, DuckDB {duckdb.__version__})"

#: what each sem_* function returns, as psql's \df shows it (the macros carry no types)
SEM_RESULTS = {
    "sem_filter": "boolean",
    "sem_join": "boolean",
    "sem_map": "text",
    "sem_map_boolean": "boolean",
    "sem_map_double": "double precision",
    "sem_map_integer": "integer",
    "sem_map_list": "text[]",
    "sem_classify": "text",
    "sem_agg": "text",
}
# a sem_* macro's parameters: the template, sem_classify's labels, up to 8 columns, the options
_SEM_ARG = (
    "CASE n WHEN 't' THEN 't text' WHEN 'l' THEN 'l text[]' "
    "WHEN 'temperature' THEN 'temperature double precision DEFAULT NULL' "
    "WHEN 'max_tokens' THEN 'max_tokens integer DEFAULT NULL' "
    "ELSE n || ' text DEFAULT NULL' END"
)
# (aliases no caller uses: a macro's argument is expanded inside its subquery)
_SEM_PROC = "__sp.oid = func_oid AND __sp.proname LIKE 'sem\\_%' ESCAPE '\\'"
# a relation named as text ('reviews', 'main.reviews', '"Mixed"'): its name and schema part
_REL_NAME = (
    "CASE WHEN starts_with(trim(split_part(rel, '.', -1)), '\"') THEN "
    "trim(split_part(rel, '.', -1), '\" ') ELSE lower(trim(split_part(rel, '.', -1))) END"
)
_REL_SCHEMA = "CASE WHEN contains(rel, '.') THEN lower(trim(split_part(rel, '.', 1), '\" ')) END"
_REL_OID = (
    "(SELECT min(__rc.oid) FROM pg_catalog.pg_class __rc JOIN pg_catalog.pg_namespace __rn "
    f"ON __rn.oid = __rc.relnamespace WHERE __rc.relname = {_REL_NAME} "
    f"AND ({_REL_SCHEMA} IS NULL OR __rn.nspname = {_REL_SCHEMA}))"
)

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
    "pg_is_in_recovery": "() AS false",
    "to_regtype": "(regtype_arg) AS (SELECT min(__rt.oid) FROM pg_catalog.pg_type __rt WHERE __rt.typname = regtype_arg)",
    "txid_current": "() AS 1",
    "array_upper": "(arr, dim) AS len(arr)",
    # psql \df: the sem_* functions with their signatures (others: DuckDB's, untyped)
    # (min: DuckDB lists a macro once per overload, with one oid)
    "pg_get_function_result": "(func_oid) AS (SELECT min(CASE __sp.proname "
    + " ".join(f"WHEN '{name}' THEN '{result}'" for name, result in SEM_RESULTS.items())
    + f" END) FROM pg_catalog.pg_proc __sp WHERE {_SEM_PROC})",
    "pg_get_function_arguments": "(func_oid) AS coalesce((SELECT min(array_to_string("
    f"list_transform(__sp.proargnames, lambda n: {_SEM_ARG}), ', ')) "
    f"FROM pg_catalog.pg_proc __sp WHERE {_SEM_PROC}), '')",
    "pg_get_function_identity_arguments": "(func_oid) AS ''",
    # every client: the server's version, in a column named version (see catalog.column_name)
    "__pg_version": f"() AS '{VERSION_TEXT}'",
    # 'reviews'::regclass (an oid, compared with catalog oids), as PostgreSQL: 42P01 if missing;
    # a catalog table DuckDB does not list (pg_catalog.pg_extension) is NULL
    "__pg_regclass": f"(rel) AS coalesce({_REL_OID}, CASE WHEN NOT starts_with(lower(rel), "
    "'pg_catalog.') THEN error('relation \"' || rel || '\" does not exist') END)",
    "to_regclass": f"(rel) AS CASE WHEN {_REL_OID} IS NOT NULL THEN rel END",
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


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def settings_macro(settings: Mapping[str, str]) -> str:
    """``CREATE ... MACRO __pg_setting``: ``current_setting(name)`` as PostgreSQL answers it,
    from the session's variables, then DuckDB's settings (names are case-insensitive); an
    unknown name is 42704, as in PostgreSQL."""
    known = dict(settings)
    known.setdefault("default_table_access_method", "heap")
    cases = " ".join(f"WHEN {_quote(k.lower())} THEN {_quote(v)}" for k, v in known.items())
    return (
        "CREATE OR REPLACE TEMP MACRO __pg_setting(setting_name) AS coalesce("
        f"CASE lower(setting_name) {cases} END, (SELECT min(__ps.setting) FROM "
        "pg_catalog.pg_settings __ps WHERE lower(__ps.name) = lower(setting_name)), "
        "error('unrecognized configuration parameter \"' || setting_name || '\"'))"
    )
