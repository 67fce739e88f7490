"""A PostgreSQL wire-protocol server in front of duckdb-sem.

BI tools, ``psql``, psycopg, SQLAlchemy and PostgreSQL's own ``postgres_fdw`` connect to it as
to PostgreSQL and run semantic SQL. Modules, bottom up:

==============  ==============================================================================
``messages``    protocol 3.0 framing: read frontend messages, build backend messages
``oids``        PostgreSQL type OIDs and names, the epoch of binary dates and timestamps
``encoders``    result values to PostgreSQL's text and binary formats
``params``      bound parameters (text or binary, with their OIDs) to Python values
``types``       Arrow result types to PostgreSQL OIDs and encoders
``auth``        SCRAM-SHA-256 verifiers and the server side of the exchange
``commands``    session commands answered by the server (SET, SHOW, BEGIN, DECLARE, FETCH...)
``catalog``     rewrites so the catalog queries of clients run on DuckDB's ``pg_catalog``
``sqlstate``    error -> SQLSTATE for ErrorResponse
``results``     a statement's fields, lazily encoded rows and command tag
``database``    the shared DuckDB instance, locked down; a SemConnection per session
``execution``   a session's connection: running SQL, cancel, error translation
``portals``     prepared statements and portals of the extended protocol
``settings``    session variables: SET, RESET, SHOW
``session``     one client: simple and extended query protocols, cursors, cancel
``server``      listener, TLS, startup, authentication, cancel requests
==============  ==============================================================================
"""

from __future__ import annotations

from duckdb_sem.pgwire.database import Database, DatabaseOptions
from duckdb_sem.pgwire.server import ServerOptions, WireServer

__all__ = ["Database", "DatabaseOptions", "ServerOptions", "WireServer"]
