"""The cost of a plan over some rows, and the remaining cost of a running query.

Both come from the optimizer's :class:`~duckdb_sem.optimizer.cost.CostModel` fed with the
estimator's statistics: the cost of a batch is the plan's LLM cost with the driving table
holding the batch's rows; the remaining cost is the same with the rows not yet processed, under
the plan the query runs now (the plan may still change, and the estimate with it).

Example:
    >>> plan_cost(plan, stats, table_rows={"reviews": 64})  # doctest: +SKIP
    3150.0
"""

from __future__ import annotations

from collections.abc import Mapping

from duckdb_sem.optimizer.cost import CostModel, Statistics
from duckdb_sem.plan.nodes import Node

__all__ = ["llm_cost", "plan_cost", "remaining_cost"]


def llm_cost(model: CostModel, plan: Node) -> float:
    """Token-equivalents of the plan's LLM calls (relational tie-breakers left out)."""
    return sum(e.cost for e in model.estimate(plan).values() if e.calls > 0)


def plan_cost(
    plan: Node, stats: Mapping[str, Statistics], *, table_rows: Mapping[str, float]
) -> float:
    return llm_cost(CostModel(table_rows=table_rows, stats=stats), plan)


def remaining_cost(
    plan: Node,
    stats: Mapping[str, Statistics],
    *,
    table_rows: Mapping[str, float],
    driving_table: str,
    rows_left: float,
) -> float:
    """Estimated LLM cost of running ``rows_left`` more rows of ``driving_table`` on ``plan``."""
    if rows_left <= 0:
        return 0.0
    rows = dict(table_rows)
    rows[driving_table] = rows_left
    return plan_cost(plan, stats, table_rows=rows)
