"""The commutation rules, as data: a parent/child pair swaps only when every rule allows it."""

from __future__ import annotations

from collections.abc import Callable

from duckdb_sem.optimizer.rules.commute_dependency import commute_dependency, join_side
from duckdb_sem.optimizer.rules.commute_granularity import commute_granularity
from duckdb_sem.plan.nodes import Node

__all__ = ["RULES", "commutes", "join_side"]

Rule = Callable[[Node, Node], bool]

RULES: tuple[Rule, ...] = (commute_dependency, commute_granularity)


def commutes(parent: Node, child: Node) -> bool:
    """Whether ``parent`` (directly above ``child``) may swap places with it."""
    return all(rule(parent, child) for rule in RULES)
