"""Rule (a), data dependency: a parent that reads an attribute its child produces never swaps.

The same rule decides where a row-wise operator lands when it moves below a join: onto the one
side that produces every attribute it reads; when no side does, it stays above.

Example:
    ``sem_filter('{0} is sport', topic)`` over ``sem_map('{0} topic', r.text) AS topic``
    cannot swap (the filter reads ``topic``), while ``sem_filter('{0} is long', r.text)``
    over the same map can.
"""

from __future__ import annotations

from duckdb_sem.plan.nodes import Join, Node, SemJoin

__all__ = ["commute_dependency", "join_side"]


def join_side(op: Node, join: Node) -> int | None:
    """Index of the join input that has every attribute ``op`` reads, or None."""
    for index, side in enumerate(join.children):
        if op.reads <= side.attrs:
            return index
    return None


def commute_dependency(parent: Node, child: Node) -> bool:
    """True when swapping ``parent`` over ``child`` keeps every read satisfied."""
    if isinstance(child, Join | SemJoin):
        if len(parent.children) != 1:
            return False
        return join_side(parent, child) is not None
    return not parent.reads & child.produces
