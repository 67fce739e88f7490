"""A PostgreSQL wire-protocol server in front of duckdb-sem.

BI tools, ``psql``, psycopg, SQLAlchemy and PostgreSQL's own ``postgres_fdw`` connect to it as
to PostgreSQL and run semantic SQL. Modules, bottom up:

=================  ============================================================================
``messages``       protocol 3.0 framing: read frontend messages, build backend messages
``oids``           PostgreSQL type OIDs and names, the epoch of binary dates and timestamps
``encoders``       result values of the simple types to PostgreSQL's text and binary formats
``columns``        an Arrow result column as the values its encoders take (dates as integers)
``datetimes``      dates, times, timestamps, intervals: infinity, BC, 24:00, IntervalStyle
``numbers``        reals, doubles and numerics as ``float4out``/``float8out``/``numeric_out``
``arrays``         arrays (any dimensions) as ``array_out`` and ``array_send`` write them
``params``         bound parameters (text or binary, with their OIDs) to Python values
``types``          Arrow result types to PostgreSQL OIDs and encoders
``auth``           SCRAM-SHA-256 verifiers and the server side of the exchange
``lexer``          PostgreSQL's lexical rules: split a Query into statements, comments, strings
``statements``     one statement as DuckDB's parser reads it: kind, rows or not, command tag
``commands``       session commands answered by the server (SET, SHOW, BEGIN, SAVEPOINT, FETCH...)
``policy``         what a session may run: isolation from other sessions, read-only
``transaction``    transactions and savepoints as PostgreSQL 15 runs them
``catalog``        rewrites so the catalog queries of clients run on DuckDB's ``pg_catalog``
``catalog_views``  per-session views of the catalog tables DuckDB lacks (or lacks columns of)
``copy_out``       COPY ... TO STDOUT lines in text and CSV format
``sqlstate``       error -> SQLSTATE for ErrorResponse
``results``        a statement's fields, lazily encoded rows (or COPY data) and command tag
``database``       the DuckDB instance on the user's file, locked down; a SemConnection per session
``execution``      a session's connection: running SQL, cancel, error translation
``portals``        prepared statements and portals of the extended protocol
``settings``       session variables: SET, RESET, SHOW
``runner``         what a session runs: statements and session commands, apart from the protocol
``session``        one client: simple and extended query protocols, COPY out
``hangup``         cancel the running statement of a client that went away
``server``         listener, TLS, startup, authentication, limits, cancel requests
=================  ============================================================================
"""

from __future__ import annotations

from duckdb_sem.pgwire.database import Database, DatabaseOptions
from duckdb_sem.pgwire.server import ServerOptions, WireServer

__all__ = ["Database", "DatabaseOptions", "ServerOptions", "WireServer"]
