"""The session: one object that owns a DuckDB connection, its settings and its engine.

``SemConnection`` (:mod:`.connection`) is what ``duckdb_sem.connect()``, its cursors, the dry
run and the wire server each get from one factory (:mod:`.factory`). A semantic statement runs
*inside* that connection's DuckDB session: its transaction, its TEMP tables, its settings
(:mod:`.transaction`, :mod:`.result`). Relations (:mod:`.relation`, :mod:`.chain`) are lazy
views of the session; caller-scope DataFrames and table functions are :mod:`.sources`;
``EXPLAIN SEMANTIC`` is :mod:`.explain`.
"""

from __future__ import annotations

from duckdb_sem.session.connection import SemConnection
from duckdb_sem.session.relation import SemRelation

__all__ = ["SemConnection", "SemRelation"]
