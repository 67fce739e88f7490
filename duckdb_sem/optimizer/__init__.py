"""The semantic query optimizer: plan, enumerate the equivalent plans, choose by cost, explain.

The pipeline is data, as in sqlglot: ``build_plan`` (as written) -> ``enumerate_plans`` (the
commutation rules in ``rules.RULES``) -> ``choose_plan`` (``cost.CostModel``) -> the executor.

Entry points used by the connection:

- ``plan_query(con, sql)`` -> the chosen :class:`LogicalPlan` (``PlanError`` for shapes it
  does not plan: run those on the UDF path);
- ``explain_choice(choice, model)`` -> the EXPLAIN text of a ranked choice
  (``duckdb_sem.session.explain`` prepares the statement as a run does and calls it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from duckdb_sem.errors import PlanError
from duckdb_sem.optimizer.cardinality import table_rows
from duckdb_sem.optimizer.choose import Choice, RankedPlan, choose_plan
from duckdb_sem.optimizer.cost import DEFAULTS, CostDefaults, CostModel, Statistics
from duckdb_sem.optimizer.enumerate import PlanSpace, count_plans, enumerate_plans
from duckdb_sem.optimizer.explain import explain_choice
from duckdb_sem.plan.build import build_plan
from duckdb_sem.plan.logical import LogicalPlan
from duckdb_sem.plan.nodes import Node

__all__ = [
    "DEFAULTS",
    "Choice",
    "CostDefaults",
    "CostModel",
    "PlanSpace",
    "RankedPlan",
    "Statistics",
    "choose_plan",
    "count_plans",
    "enumerate_plans",
    "explain_choice",
    "optimize",
    "plan_query",
]

MAX_PLANS = 1000


def _raw(con: Any) -> Any:
    """The plain DuckDB connection under a SemConnection (no SQL rewriting)."""
    return getattr(con, "duckdb", con)


def _columns_of(raw: Any) -> Any:
    def columns(table: str) -> Sequence[str]:
        cols: list[str] = raw.sql(f"SELECT * FROM {table} LIMIT 0").columns
        return cols

    return columns


def optimize(
    con: Any,
    sql: str,
    *,
    stats: Mapping[str, Statistics] | None = None,
    max_plans: int = MAX_PLANS,
    written: Node | None = None,
) -> tuple[Choice, CostModel]:
    """Build (unless ``written`` is the plan of ``sql`` already), enumerate and rank the plans
    of ``sql``; raise PlanError if it is not planned."""
    raw = _raw(con)
    if written is None:
        written = build_plan(sql, _columns_of(raw))
    if not any(node.semantic for node in written.walk()):
        raise PlanError("no semantic call to plan; DuckDB runs this query as it is")
    model = CostModel(table_rows=table_rows(raw, written), stats=stats)
    return choose_plan(written, model, max_plans=max_plans), model


def plan_query(
    con: Any,
    sql: str,
    *,
    stats: Mapping[str, Statistics] | None = None,
    max_plans: int = MAX_PLANS,
) -> LogicalPlan:
    """The cheapest equivalent plan of ``sql`` (run it with ``runtime.execute_plan``)."""
    choice, _ = optimize(con, sql, stats=stats, max_plans=max_plans)
    return LogicalPlan(choice.best.plan, sql, choice.best.cost, choice.total)
