"""Derived tables in FROM and JOINs: which subqueries are planned, and what they show.

A planned derived table is ``(SELECT columns [, sem_map(...) AS name] FROM one_table
[WHERE ...]) AS alias``: selected columns may be renamed or ``*``; joins, aggregates, GROUP BY,
DISTINCT, ORDER BY, LIMIT, window functions, computed columns, nested subqueries and a missing
alias raise :class:`PlanError` (the query then runs on the UDF path). The plan builder plans
the subquery on its own, below the outer joins, with its scan keeping the outer alias.

Example: in ``FROM (SELECT id, text AS body FROM reviews WHERE sem_filter('{text} good')) AS r``
the outer query sees ``r.id`` and ``r.body``; ``r.body`` means the attribute ``r.text``.
"""

from __future__ import annotations

from sqlglot import exp

from duckdb_sem.errors import BindError, PlanError
from duckdb_sem.plan.calls import MAPS, is_semantic
from duckdb_sem.plan.scope import Scope

__all__ = ["derived_names", "derived_select", "nested_subquery_error"]

_DERIVED = (
    "only (SELECT columns [, sem_map(...) AS name] FROM one_table [WHERE ...]) AS alias "
    "is planned in FROM (the query runs on the UDF path)"
)
_NOT_IN_DERIVED = {"with_": "WITH", "joins": "a join", "group": "GROUP BY", "having": "HAVING",
                   "distinct": "DISTINCT", "order": "ORDER BY", "limit": "LIMIT",
                   "offset": "OFFSET", "windows": "WINDOW", "qualify": "QUALIFY",
                   "laterals": "LATERAL", "pivots": "PIVOT", "prewhere": "PREWHERE",
                   "sample": "SAMPLE", "into": "INTO", "locks": "FOR UPDATE"}  # fmt: skip


def nested_subquery_error(alias: str) -> PlanError:
    """The error for a subquery inside a derived table's FROM."""
    return PlanError(f"subquery {alias}: a nested subquery is not planned; {_DERIVED}")


def derived_select(sub: exp.Subquery) -> tuple[exp.Select, str]:
    """The SELECT of a derived table and its alias; PlanError for what is not planned."""
    inner, alias = sub.this, sub.alias
    if not alias:
        raise PlanError("a subquery in FROM needs an alias (AS name) to be planned")
    if not isinstance(inner, exp.Select):
        raise PlanError(f"subquery {alias}: {inner.key.upper()} is not planned; {_DERIVED}")
    table_alias = sub.args.get("alias")
    if isinstance(table_alias, exp.TableAlias) and table_alias.columns:
        raise PlanError(f"subquery {alias}: name its columns in its select list, not {alias}(...)")
    for key in ("order", "limit", "offset", "pivots", "sample"):
        if sub.args.get(key):
            raise PlanError(f"subquery {alias}: {key.upper()} is not planned; {_DERIVED}")
    for key, what in _NOT_IN_DERIVED.items():
        if inner.args.get(key):
            raise PlanError(f"subquery {alias}: {what} is not planned; {_DERIVED}")
    for node in inner.walk():
        if isinstance(node, exp.AggFunc | exp.Window):
            raise PlanError(f"subquery {alias}: aggregates and window functions are not planned")
        if node is not inner and isinstance(node, exp.Subquery | exp.Select):
            raise nested_subquery_error(alias)
        if is_semantic(node) and node.name.lower() == "sem_agg":
            raise PlanError(f"subquery {alias}: sem_agg is not planned; {_DERIVED}")
    for item in inner.expressions:
        body = item.this if isinstance(item, exp.Alias) else item
        if isinstance(item, exp.Star | exp.Column):
            continue
        if isinstance(item, exp.Alias) and (
            isinstance(body, exp.Column) or (is_semantic(body) and body.name.lower() in MAPS)
        ):
            continue
        raise PlanError(
            f"subquery {alias}: {item.sql(dialect='duckdb')} is not planned in its select list "
            "(columns, and sem_map(...) AS name); the query runs on the UDF path"
        )
    return inner, alias


def derived_names(
    items: list[tuple[exp.Expression, str]], map_attrs: set[str], scope: Scope, alias: str
) -> tuple[tuple[str, str], ...]:
    """(name, attribute) of each column a derived table's select list shows the outer query."""
    names: list[tuple[str, str]] = []
    for expr, name in items:
        assert isinstance(expr, exp.Column)  # derived_select admits nothing else
        if not expr.table and expr.name in map_attrs:
            attr: str | None = expr.name
        else:
            path = ".".join(p.name for p in expr.parts)
            attr = scope.resolve(path, where=f"subquery {alias}")
        assert attr is not None
        if name.lower() in {n.lower() for n, _ in names}:
            raise BindError(f"subquery {alias}: two columns are named {name!r}; rename one")
        names.append((name, attr))
    return tuple(names)
