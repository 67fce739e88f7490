"""PostgreSQL tables as sources of semantic queries, read with ``COPY`` into Arrow.

==============  ==============================================================================
``catalog``     the tables and their columns' types (a domain's: its base type's)
``types``       what each PostgreSQL type is selected, parsed and converted as
``reader``      one ``COPY (SELECT ...) TO STDOUT`` into an Arrow table, types from the catalog
``pushdown``    which columns and WHERE conjuncts of a statement a table read needs
``source``      ``attach_postgres``: the catalog in DuckDB, and the statement rewrite
==============  ==============================================================================
"""

from __future__ import annotations

from duckdb_sem.pg.source import PgSource, PgTable, attach_postgres

__all__ = ["PgSource", "PgTable", "attach_postgres"]
