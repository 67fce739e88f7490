"""Running semantic queries: the engine (operators), query context, the plan executor, and the
SEU loop with its baselines (:func:`run_query`, selected per query by :class:`RuntimeOptions`)."""

from duckdb_sem.runtime.entry import run_query, written_plan
from duckdb_sem.runtime.execute_plan import execute_plan
from duckdb_sem.runtime.progress import MODES, QueryProgress, RuntimeOptions

__all__ = [
    "MODES",
    "QueryProgress",
    "RuntimeOptions",
    "execute_plan",
    "run_query",
    "written_plan",
]
