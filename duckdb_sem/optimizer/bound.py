"""The paper's bound on the size of a plan space: ``N! / (2^J * prod(hook lengths))``.

``N`` counts the operators of the written plan (scans, joins, row-wise and set-wise operators;
relational filters that enumeration does not move are left out), ``J`` its joins. The
*dependency forest* keeps each parent/child edge of the written plan that the commutation rules
forbid to swap and drops the others; the hook length of an operator is the size of its subtree
in that forest. ``N!/prod(hooks)`` counts the linear orders that respect the forest, and each
join halves it (its two inputs' orders are not told apart).

Example:
    ``SemFilter(r.text)`` over ``Join(Scan r, Scan m)``: the filter commutes with the join, so
    the forest is {filter} and {join, r, m}: 4! / (2 * 1 * 3 * 1 * 1) = 4 >= 2 plans.
"""

from __future__ import annotations

import math
from fractions import Fraction

from duckdb_sem.optimizer.enumerate import split_plan
from duckdb_sem.optimizer.rules import commutes
from duckdb_sem.plan.nodes import Join, Node, SemJoin

__all__ = ["plan_bound"]


def plan_bound(plan: Node) -> Fraction:
    split = split_plan(plan)
    region = split.skeleton
    for op in split.ops:
        region = op.with_children(region)
    written = split.rebuild(region)
    hooks: list[int] = []

    def size(node: Node) -> int:
        """Subtree size of ``node`` in the forest (children it cannot swap with)."""
        total = 1
        for child in node.children:
            below = size(child)
            if not commutes(node, child):
                total += below
        hooks.append(total)
        return total

    size(written)
    joins = sum(isinstance(n, Join | SemJoin) for n in written.walk())
    return Fraction(math.factorial(len(hooks)), 2**joins * math.prod(hooks))
