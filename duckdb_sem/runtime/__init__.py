"""Running semantic queries: the engine (operators), query context, the plan executor, and the
SEU loop with its baselines (:func:`run_query`, selected per query by :class:`RuntimeOptions`)."""

from typing import Any

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


def run_query(*args: Any, **kwargs: Any) -> Any:
    """See :func:`duckdb_sem.runtime.entry.run_query` (imported lazily: it loads the
    optimizer, which itself imports this package)."""
    from duckdb_sem.runtime.entry import run_query as run

    return run(*args, **kwargs)


def written_plan(*args: Any, **kwargs: Any) -> Any:
    """See :func:`duckdb_sem.runtime.entry.written_plan`."""
    from duckdb_sem.runtime.entry import written_plan as plan

    return plan(*args, **kwargs)
