"""``LogicalPlan``: a plan ready to run, with what the optimizer knew when it chose it."""

from __future__ import annotations

from dataclasses import dataclass

from duckdb_sem.plan.nodes import Node

__all__ = ["LogicalPlan"]


@dataclass(frozen=True)
class LogicalPlan:
    """The chosen plan of ``sql``: its root, its estimated cost, and the size of its space."""

    root: Node
    sql: str = ""
    cost: float = 0.0
    equivalent_plans: int = 1
