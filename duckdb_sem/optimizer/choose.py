"""Choose the cheapest of the enumerated plans under a cost model.

Relational filters already run before semantic ones wherever that is legal (enumeration places
them as low as they go), so the choice is among placements and orders of semantic operators:
e.g. a ``sem_filter`` that reads one side of a join runs below the join exactly when the
estimated LLM work (rows reaching it times tokens per row) is lower there.
"""

from __future__ import annotations

from dataclasses import dataclass

from duckdb_sem.optimizer.cost import CostModel
from duckdb_sem.optimizer.enumerate import enumerate_plans
from duckdb_sem.plan.nodes import Node

__all__ = ["Choice", "RankedPlan", "choose_plan", "plan_key"]


@dataclass(frozen=True)
class RankedPlan:
    plan: Node
    cost: float


@dataclass(frozen=True)
class Choice:
    """Enumerated plans cheapest first; ``total`` counts the whole space, pruned or not."""

    ranked: tuple[RankedPlan, ...]
    total: int
    pruning: str | None = None

    @property
    def best(self) -> RankedPlan:
        return self.ranked[0]


def plan_key(plan: Node) -> str:
    """A deterministic text form of a plan, for ties and for display."""
    inner = ", ".join(plan_key(c) for c in plan.children)
    return f"{plan.label()}({inner})" if inner else plan.label()


def choose_plan(plan: Node, model: CostModel, *, max_plans: int = 1000) -> Choice:
    """Enumerate the equivalents of ``plan`` and rank them by ``model``'s estimated cost."""
    space = enumerate_plans(plan, max_plans=max_plans, rank=model.rank)
    scored = [RankedPlan(p, model.cost(p)) for p in space.plans]
    # Costs within a relative 1e-9 are ties; the tie-break keeps the choice deterministic.
    scored.sort(key=lambda r: (float(f"{r.cost:.9g}"), plan_key(r.plan)))
    return Choice(tuple(scored), space.total, space.pruning)
