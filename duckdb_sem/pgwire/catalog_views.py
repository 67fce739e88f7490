"""PostgreSQL catalog tables DuckDB's ``pg_catalog`` lacks, or lacks columns of, as TEMP views.

A query that reads ``pg_catalog.pg_policy`` (psql ``\\d``) or ``pg_index.indnullsnotdistinct``
(SQLAlchemy) is rewritten (:mod:`.catalog`) to read ``__pg_policy`` / ``__pg_index`` instead:
DuckDB's own view with the missing columns added, or an empty table of the right shape where
DuckDB has nothing of the kind (no row security, publications or inheritance). Each session's
cursor gets its own copies (:func:`~duckdb_sem.pgwire.catalog.install_compat`).
"""

from __future__ import annotations

from duckdb_sem.pgwire.catalog_macros import SEM_RESULTS
from duckdb_sem.pgwire.oids import OID

__all__ = ["COMPAT_VIEWS", "PG_CATALOG"]

#: pg_catalog's namespace oid, as in PostgreSQL: DuckDB's own schemas (of its ``system``
#: catalog: built-in functions, catalog views) are listed as pg_catalog, where clients look
#: for built-ins (psql's tab completion compares with it)
PG_CATALOG = 11
_SYSTEM = "(SELECT oid FROM duckdb_schemas() WHERE database_name = 'system')"


def _empty(**columns: str) -> str:
    return "SELECT " + ", ".join(f"NULL::{t} AS {c}" for c, t in columns.items()) + " WHERE false"


# DuckDB numbers a constraint's columns from 0 (PostgreSQL's attnum from 1), lists NOT NULL as
# contype 'x' (exclusion, in PostgreSQL) and gives primary keys and unique constraints no
# index: here they get one, numbered -oid, as SQLAlchemy's and psql's joins expect.
# Primary keys are named as PostgreSQL names them (<table>_pkey).
_CONSTRAINT = (
    "SELECT c.* REPLACE (CASE WHEN contype IN ('p', 'u') THEN -c.oid ELSE conindid END AS "
    "conindid, list_transform(conkey, lambda k: k + 1)::SMALLINT[] AS conkey, CASE WHEN "
    "contype = 'p' THEN t.relname || '_pkey' ELSE conname END AS conname) "
    "FROM pg_catalog.pg_constraint c LEFT JOIN pg_catalog.pg_class t ON t.oid = c.conrelid "
    "WHERE contype <> 'x'"
)
# An explicit index's columns are in indexprs ('[a, b]'); indkey holds their attnums.
# indoption is int2vector text ('0 0'), which is what SQLAlchemy parses from PostgreSQL.
_INDEX = """
WITH cols AS (
    SELECT i.indexrelid, k.pos, a.attnum
    FROM pg_catalog.pg_index i,
         unnest(string_split(trim(i.indexprs, '[]'), ', ')) WITH ORDINALITY AS k(name, pos)
    LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attname = trim(k.name, '"')
), keys AS (
    SELECT indexrelid, list(coalesce(attnum, 0)::SMALLINT ORDER BY pos) AS indkey
    FROM cols GROUP BY indexrelid
)
SELECT i.* REPLACE (
    keys.indkey AS indkey, len(keys.indkey)::INTEGER AS indnatts,
    len(keys.indkey)::INTEGER AS indnkeyatts, NULL::VARCHAR AS indexprs,
    NULL::VARCHAR AS indpred, array_to_string(list_transform(keys.indkey, lambda k: 0), ' ') AS indoption,
    list_transform(keys.indkey, lambda k: 0::BIGINT) AS indclass,
    list_transform(keys.indkey, lambda k: 0::BIGINT) AS indcollation
), false AS indnullsnotdistinct
FROM pg_catalog.pg_index i LEFT JOIN keys USING (indexrelid)
UNION ALL BY NAME
SELECT -c.oid AS indexrelid, c.conrelid AS indrelid, len(c.conkey)::INTEGER AS indnatts,
    len(c.conkey)::INTEGER AS indnkeyatts, true AS indisunique, c.contype = 'p' AS indisprimary,
    false AS indisexclusion, true AS indimmediate, false AS indisclustered, true AS indisvalid,
    false AS indcheckxmin, true AS indisready, true AS indislive, false AS indisreplident,
    list_transform(c.conkey, lambda k: (k + 1)::SMALLINT) AS indkey,
    list_transform(c.conkey, lambda k: 0::BIGINT) AS indcollation,
    list_transform(c.conkey, lambda k: 0::BIGINT) AS indclass,
    array_to_string(list_transform(c.conkey, lambda k: 0), ' ') AS indoption, NULL::VARCHAR AS indexprs,
    NULL::VARCHAR AS indpred, false AS indnullsnotdistinct
FROM pg_catalog.pg_constraint c WHERE c.contype IN ('p', 'u')
"""

# Tables of --postgres sources are views in DuckDB (see duckdb_sem.pg.source); clients see them
# as tables in a schema named as they are queried (pg.public).
_SOURCE = "comment LIKE 'PostgreSQL table %'"

# Types the server names in RowDescription or accepts as parameters that DuckDB's pg_type lacks
# (text, json, jsonb, name, the arrays...): rows so a client can look up every OID it is sent,
# in pg_catalog, with DuckDB's own types (psql \dT hides pg_catalog's types).
_TYPE_LENGTHS = {"bool": 1, "char": 1, "name": 64, "oid": 4, "int2": 2, "int4": 4, "int8": 8,
                 "float4": 4, "float8": 8, "date": 4, "time": 8, "timetz": 12, "timestamp": 8,
                 "timestamptz": 8, "interval": 16, "uuid": 16}  # fmt: skip
_TYPE_CATEGORY = {"text": "S", "varchar": "S", "bpchar": "S", "name": "S", "json": "U",
                  "jsonb": "U", "bool": "B", "bytea": "U", "uuid": "U", "date": "D",
                  "time": "D", "timetz": "D", "timestamp": "D", "timestamptz": "D",
                  "interval": "T", "unknown": "X"}  # fmt: skip


def _type_row(name: str, oid: int) -> str:
    element = OID.get(name[1:], 0) if name.startswith("_") else 0
    array = OID.get("_" + name, 0)
    length = -1 if element else _TYPE_LENGTHS.get(name, -1)
    category = "A" if element else _TYPE_CATEGORY.get(name, "N")
    return (
        f"({oid}, '{name}', {length}, '{category}', {element}, {array}, "
        f"'{'_' if element else ''}{name.removeprefix('_')}'::VARCHAR)"
    )


_TYPE = (
    f"SELECT * REPLACE ({PG_CATALOG}::BIGINT AS typnamespace) FROM pg_catalog.pg_type "
    "UNION ALL BY NAME "
    "SELECT t.oid, t.typname, 11::BIGINT AS typnamespace, t.typlen, t.typlen > 0 AND t.typlen <= 8 AS typbyval, 'b' AS typtype, "
    "t.typcategory, false AS typispreferred, true AS typisdefined, ',' AS typdelim, "
    "0::BIGINT AS typrelid, t.typelem, t.typarray, 'i' AS typalign, 'x' AS typstorage "
    "FROM (VALUES " + ", ".join(_type_row(n, o) for n, o in OID.items()) + ") "
    "AS t(oid, typname, typlen, typcategory, typelem, typarray, input) "
    "WHERE t.oid NOT IN (SELECT oid FROM pg_catalog.pg_type WHERE oid IS NOT NULL)"
)
# psql \df: the session's sem_* macros live in its temp schema, which pg_namespace does not
# list; shown in the database's main schema, where they are called from (sem_agg as an
# aggregate, which it is). DuckDB's own functions keep their namespace (hidden from \df).
_PROC = (
    "SELECT p.* REPLACE (CASE WHEN p.proname LIKE 'sem\\_%' ESCAPE '\\' AND p.pronamespace NOT "
    "IN (SELECT oid FROM pg_catalog.pg_namespace) THEN (SELECT min(oid) FROM "
    "pg_catalog.pg_namespace WHERE nspname = 'main') "
    f"WHEN p.pronamespace IN {_SYSTEM} THEN {PG_CATALOG} ELSE p.pronamespace END AS pronamespace, "
    "CASE WHEN p.proname = 'sem_agg' THEN 'a' ELSE p.prokind END AS prokind, "
    f"CASE WHEN p.pronamespace IN {_SYSTEM} THEN 12 ELSE 14 END AS prolang, "
    "coalesce(p.prorettype, CASE p.proname "
    + " ".join(f"WHEN '{name}' THEN '{result}'" for name, result in SEM_RESULTS.items())
    + " ELSE 'anyelement' END) AS prorettype, NULL::VARCHAR AS prosrc) "
    "FROM pg_catalog.pg_proc p"
)
# pgcli: the languages functions are written in (DuckDB's own: internal; macros: sql)
_LANGUAGE = (
    "SELECT * FROM (VALUES (12::BIGINT, 'internal', false, false), (14, 'sql', false, true)) "
    "AS l(oid, lanname, lanispl, lanpltrusted)"
)
# Grafana, Metabase, pgAdmin: this session's own row (others' are not visible here)
_ACTIVITY = (
    "SELECT (SELECT min(oid) FROM pg_catalog.pg_database WHERE datname = current_database()) "
    "AS datid, current_database() AS datname, pg_backend_pid() AS pid, NULL::INTEGER AS "
    "leader_pid, 10::BIGINT AS usesysid, current_user AS usename, "
    "__pg_setting('application_name') AS application_name, NULL::VARCHAR AS client_addr, "
    "NULL::VARCHAR AS client_hostname, NULL::INTEGER AS client_port, NULL::TIMESTAMPTZ AS "
    "backend_start, NULL::TIMESTAMPTZ AS xact_start, NULL::TIMESTAMPTZ AS query_start, "
    "NULL::TIMESTAMPTZ AS state_change, NULL::VARCHAR AS wait_event_type, NULL::VARCHAR AS "
    "wait_event, 'active' AS state, NULL::VARCHAR AS backend_xid, NULL::VARCHAR AS "
    "backend_xmin, NULL::BIGINT AS query_id, current_query() AS query, "
    "'client backend' AS backend_type"
)

#: table name -> the SELECT its view runs
COMPAT_VIEWS: dict[str, str] = {
    "pg_collation": _empty(oid="BIGINT", collname="VARCHAR", collnamespace="BIGINT"),
    "pg_class": (
        "SELECT * REPLACE (NULL::VARCHAR[] AS reloptions, CASE WHEN oid IN (SELECT view_oid "
        f"FROM duckdb_views() WHERE {_SOURCE}) THEN 'r' ELSE relkind END AS relkind, "
        f"CASE WHEN relnamespace IN {_SYSTEM} THEN {PG_CATALOG} ELSE relnamespace END "
        "AS relnamespace, 'd' AS relreplident), false AS relforcerowsecurity "
        "FROM pg_catalog.pg_class WHERE NOT starts_with(relname, '__pg_')"
    ),
    "pg_namespace": (
        "SELECT * FROM pg_catalog.pg_namespace UNION ALL BY NAME SELECT s.oid, "
        "s.database_name || '.' || s.schema_name AS nspname, 0::BIGINT AS nspowner "
        "FROM duckdb_schemas() s WHERE s.oid IN (SELECT schema_oid FROM duckdb_views() "
        f"WHERE {_SOURCE}) UNION ALL BY NAME SELECT {PG_CATALOG}::BIGINT AS oid, "
        "'pg_catalog' AS nspname, 10 AS nspowner"
    ),
    "pg_roles": (
        "SELECT 10::BIGINT AS oid, 'duckdb' AS rolname, true AS rolsuper, true AS rolinherit, "
        "false AS rolcreaterole, false AS rolcreatedb, true AS rolcanlogin, "
        "false AS rolreplication, false AS rolbypassrls, -1 AS rolconnlimit, "
        "NULL::TIMESTAMPTZ AS rolvaliduntil, NULL::VARCHAR[] AS rolconfig"
    ),
    "pg_index": _INDEX,
    "pg_constraint": _CONSTRAINT,
    "pg_database": (
        "SELECT d.*, 0::BIGINT AS datdba, 6 AS encoding, 'C' AS datcollate, 'C' AS datctype, "
        "NULL::VARCHAR AS daticulocale, 'c' AS datlocprovider, NULL::VARCHAR[] AS datacl, "
        "-1 AS datconnlimit, 0::BIGINT AS dattablespace FROM pg_catalog.pg_database d "
        "WHERE d.datname NOT IN ('system', 'temp')"  # DuckDB's own catalogs (Superset lists)
    ),
    "pg_policy": _empty(
        oid="BIGINT", polname="VARCHAR", polrelid="BIGINT", polcmd="VARCHAR",
        polpermissive="BOOLEAN", polroles="BIGINT[]", polqual="VARCHAR", polwithcheck="VARCHAR",
    ),
    "pg_statistic_ext": _empty(
        oid="BIGINT", stxrelid="BIGINT", stxname="VARCHAR", stxnamespace="BIGINT",
        stxstattarget="INTEGER", stxkind="VARCHAR[]",
    ),
    "pg_publication": _empty(oid="BIGINT", pubname="VARCHAR", puballtables="BOOLEAN"),
    "pg_publication_namespace": _empty(oid="BIGINT", pnpubid="BIGINT", pnnspid="BIGINT"),
    "pg_publication_rel": _empty(
        oid="BIGINT", prpubid="BIGINT", prrelid="BIGINT", prqual="VARCHAR", prattrs="INTEGER[]"
    ),
    "pg_inherits": _empty(
        inhrelid="BIGINT", inhparent="BIGINT", inhseqno="INTEGER", inhdetachpending="BOOLEAN"
    ),
    "pg_opclass": _empty(
        oid="BIGINT", opcname="VARCHAR", opcmethod="BIGINT", opcnamespace="BIGINT",
        opcdefault="BOOLEAN",
    ),
    "pg_trigger": _empty(
        oid="BIGINT", tgrelid="BIGINT", tgname="VARCHAR", tgenabled="VARCHAR",
        tgisinternal="BOOLEAN", tgparentid="BIGINT",
    ),
    "pg_foreign_table": _empty(ftrelid="BIGINT", ftserver="BIGINT", ftoptions="VARCHAR[]"),
    "pg_type": _TYPE,
    "pg_proc": _PROC,
    "pg_language": _LANGUAGE,
    # psql \d+: a column's storage as PostgreSQL's default for its type (plain, extended)
    "pg_attribute": (
        "SELECT * REPLACE (CASE WHEN attlen > 0 THEN 'p' ELSE 'x' END AS attstorage, "
        "'' AS attcompression) FROM pg_catalog.pg_attribute"
    ),
    "pg_stat_activity": _ACTIVITY,
    # no roles but the one (psql \du), no PostgreSQL extensions (psql \dx; DuckDB's are not)
    "pg_auth_members": _empty(
        roleid="BIGINT", member="BIGINT", grantor="BIGINT", admin_option="BOOLEAN",
    ),
    "pg_extension": _empty(
        oid="BIGINT", extname="VARCHAR", extowner="BIGINT", extnamespace="BIGINT",
        extrelocatable="BOOLEAN", extversion="VARCHAR", extconfig="BIGINT[]",
        extcondition="VARCHAR[]",
    ),
}  # fmt: skip
