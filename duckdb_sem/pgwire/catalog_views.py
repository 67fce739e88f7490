"""PostgreSQL catalog tables DuckDB's ``pg_catalog`` lacks, or lacks columns of, as TEMP views.

A query that reads ``pg_catalog.pg_policy`` (psql ``\\d``) or ``pg_index.indnullsnotdistinct``
(SQLAlchemy) is rewritten (:mod:`.catalog`) to read ``__pg_policy`` / ``__pg_index`` instead:
DuckDB's own view with the missing columns added, or an empty table of the right shape where
DuckDB has nothing of the kind (no row security, publications or inheritance). Each session's
cursor gets its own copies (:func:`~duckdb_sem.pgwire.catalog.install_compat`).
"""

from __future__ import annotations

__all__ = ["COMPAT_VIEWS"]


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

#: table name -> the SELECT its view runs
COMPAT_VIEWS: dict[str, str] = {
    "pg_collation": _empty(oid="BIGINT", collname="VARCHAR", collnamespace="BIGINT"),
    "pg_class": (
        "SELECT * REPLACE (NULL::VARCHAR[] AS reloptions, CASE WHEN oid IN (SELECT view_oid "
        f"FROM duckdb_views() WHERE {_SOURCE}) THEN 'r' ELSE relkind END AS relkind), "
        "false AS relforcerowsecurity FROM pg_catalog.pg_class"
    ),
    "pg_namespace": (
        "SELECT * FROM pg_catalog.pg_namespace UNION ALL BY NAME SELECT s.oid, "
        "s.database_name || '.' || s.schema_name AS nspname, 0::BIGINT AS nspowner "
        "FROM duckdb_schemas() s WHERE s.oid IN (SELECT schema_oid FROM duckdb_views() "
        f"WHERE {_SOURCE})"
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
        "-1 AS datconnlimit, 0::BIGINT AS dattablespace FROM pg_catalog.pg_database d"
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
}  # fmt: skip
