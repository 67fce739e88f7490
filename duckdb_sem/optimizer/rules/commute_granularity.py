"""Rule (b), granularity: only row-wise operators commute, with each other or with a join.

Row-wise operators (``Filter``, ``SemFilter``, ``SemMap``) see one row at a time, so their order
does not change the result, and an inner join pairs rows without looking at the other operators.
Set-wise operators (aggregate, sort, top-k, limit, distinct, ``sem_agg``) depend on the whole
input and never swap with anything; neither do scans, and joins are not reordered.

Example:
    ``Limit 10`` over ``SemFilter`` never swaps (limit is set-wise);
    ``SemFilter`` over ``Join`` may move below it.
"""

from __future__ import annotations

from duckdb_sem.plan.nodes import Join, Node, SemJoin

__all__ = ["commute_granularity"]


def _is_join(node: Node) -> bool:
    return isinstance(node, Join | SemJoin)


def commute_granularity(parent: Node, child: Node) -> bool:
    """True when both are row-wise, or one is row-wise and the other an inner join."""
    if parent.row_wise and child.row_wise:
        return True
    return (parent.row_wise and _is_join(child)) or (_is_join(parent) and child.row_wise)
