"""Running semantic queries: the engine (operators), query context, and the plan executor."""

from duckdb_sem.runtime.execute_plan import execute_plan

__all__ = ["execute_plan"]
