"""The sink of a plan: the set-wise operators above the row-wise region, which never move.

In order, bottom to top: ``Aggregate`` (GROUP BY, HAVING, or any aggregate in the select list),
``Project`` (the select list, DISTINCT), ``Sort``, ``Limit``, then one ``SemAgg`` per ``sem_agg``
select item. A ``sem_agg`` item becomes ``list(col)`` columns in the projection that the
``SemAgg`` above folds, so DuckDB does the grouping.

Example: ``SELECT genre, sem_agg('Summarize {text}') AS s FROM r GROUP BY genre`` sinks into
``SemAgg(Project(Aggregate(region, [genre]), [genre, list(r.text) AS __sem_agg_0_0]))``.
"""

from __future__ import annotations

from sqlglot import exp

from duckdb_sem.errors import PlanError
from duckdb_sem.plan import nodes as n
from duckdb_sem.plan.calls import is_semantic, sem_call
from duckdb_sem.plan.scope import Scope

__all__ = ["build_sink"]


def build_sink(
    node: n.Node, items: list[tuple[exp.Expression, str]], tree: exp.Select, scope: Scope
) -> n.Node:
    """The sink of ``tree`` over the row-wise ``node``; ``items``: its (expression, name)s."""
    project: list[n.ProjectItem] = []
    aggs: list[tuple[n.SemCall, str]] = []
    for expr, name in items:
        if is_semantic(expr) and expr.name.lower() == "sem_agg":
            call = sem_call(expr, scope)
            lists = []
            for j, attr in enumerate(call.args):
                col = f"__sem_agg_{len(aggs)}_{j}"
                listed = exp.Anonymous(this="list", expressions=[exp.column(attr, quoted=True)])
                project.append(n.ProjectItem(listed, col, frozenset({attr})))
                lists.append(col)
            agg = n.SemCall(call.template, tuple(lists), call.kind, call.output_type, call.options)
            aggs.append((agg, name))
            continue
        if any(is_semantic(x) for x in expr.walk()):
            raise PlanError("sem_filter, sem_join and nested sem_agg are not planned in SELECT")
        item, reads = scope.rewrite(expr, where="SELECT")
        project.append(n.ProjectItem(item, name, reads))
    group = tree.args.get("group")
    having = tree.args.get("having")
    has_agg = bool(aggs) or any(isinstance(x, exp.AggFunc) for e, _ in items for x in e.walk())
    if group is not None or having is not None or has_agg:
        keys, reads = _clause(group.expressions if group is not None else [], "GROUP BY", scope)
        having_expr = _clause([having.this], "HAVING", scope)[0][0] if having is not None else None
        node = n.Aggregate(node, tuple(keys), having_expr, reads)
    node = n.Project(node, tuple(project), distinct=bool(tree.args.get("distinct")))
    order = tree.args.get("order")
    if order is not None:
        for key in order.expressions:
            if any(
                c.name.lower() in {name.lower() for _, name in aggs}
                for c in key.find_all(exp.Column)
            ):
                raise PlanError("ORDER BY a sem_agg result is not planned")
        keys = _clause(order.expressions, "ORDER BY", scope)[0]
        node = n.Sort(node, tuple(keys), tuple(_key_reads(k, scope) for k in order.expressions))
    limit, offset = tree.args.get("limit"), tree.args.get("offset")
    if limit is not None or offset is not None:
        node = n.Limit(node, _int(limit), _int(offset) or 0)
    for call, name in aggs:
        node = n.SemAgg(node, call, name)
    return node


def _clause(
    exprs: list[exp.Expression], where: str, scope: Scope
) -> tuple[list[exp.Expr], frozenset[str]]:
    out: list[exp.Expr] = []
    reads = frozenset[str]()
    for e in exprs:
        if any(is_semantic(x) for x in e.walk()):
            raise PlanError(f"a semantic call in {where} is not planned")
        tree, r = scope.rewrite(e, where=where, aliases=True)
        out.append(tree)
        reads |= r
    return out, reads


def _key_reads(key: exp.Expr, scope: Scope) -> frozenset[str] | None:
    """The attributes an ORDER BY key reads; None if it reads a select alias or no column."""
    attrs = [
        scope.resolve(".".join(p.name for p in c.parts), where="ORDER BY", aliases=True)
        for c in key.find_all(exp.Column)
    ]
    if not attrs or any(a is None for a in attrs):
        return None
    return frozenset(a for a in attrs if a is not None)


def _int(node: exp.Expression | None) -> int | None:
    if node is None:
        return None
    value = node.expression if isinstance(node, exp.Limit | exp.Offset) else node
    if not isinstance(value, exp.Literal) or value.is_string:
        raise PlanError("LIMIT and OFFSET must be integer literals to be planned")
    return int(value.this)
