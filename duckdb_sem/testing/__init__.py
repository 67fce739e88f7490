"""Tools for testing duckdb-sem deployments: a fault-injecting proxy for LLM servers."""

from duckdb_sem.testing.fault_proxy import Exchange, FaultProxy, fail_every, fail_first, fail_seeded

__all__ = ["Exchange", "FaultProxy", "fail_every", "fail_first", "fail_seeded"]
