"""The SQL a plan's relational parts become, and where its set-wise sink begins.

Every column is named after its attribute (``"r.text"``), so the SQL of any subtree can stand
in for another (a registered batch, a materialised chain) and the SQL above it still reads.

Example: ``Scan reviews AS r WHERE "r.id" > 3`` over columns ``id, text`` becomes::

    SELECT * FROM (SELECT "r"."id" AS "r.id", "r"."text" AS "r.text" FROM reviews AS "r")
    WHERE "r.id" > 3
"""

from __future__ import annotations

from duckdb_sem.plan.limits import split_sink
from duckdb_sem.plan.nodes import Aggregate, Limit, Node, Project, Scan, Sort, quote

__all__ = ["Path", "join_sql", "scan_sql", "sink_select", "split_sink"]

Path = tuple[int, ...]  # child indices from the root


def sink_select(source: str, parts: dict[type, Node]) -> str:
    """One SELECT over ``source`` for the sink's ``Project`` and what sits with it."""
    project = parts.get(Project)
    if not isinstance(project, Project):
        return source
    items = ", ".join(f"{i.sql} AS {quote(i.name)}" for i in project.items)
    sql = f"SELECT {'DISTINCT ' if project.distinct else ''}{items} FROM ({source}) AS __in"
    agg = parts.get(Aggregate)
    if isinstance(agg, Aggregate):
        sql += f" GROUP BY {', '.join(agg.key_sql)}" if agg.keys else ""
        sql += f" HAVING {agg.having_sql}" if agg.having_sql else ""
    sort = parts.get(Sort)
    if isinstance(sort, Sort):
        sql += f" ORDER BY {', '.join(sort.key_sql)}"
    limit = parts.get(Limit)
    if isinstance(limit, Limit):
        sql += f" LIMIT {limit.limit}" if limit.limit is not None else ""
        sql += f" OFFSET {limit.offset}" if limit.offset else ""
    return sql


def scan_sql(
    node: Scan, *, rowids: tuple[int, int] | None = None, rowid_column: str | None = None
) -> str:
    """The scan's columns as attributes, with its pushed-down predicates; ``rowids``: only
    the table's rows with ``lo <= rowid < hi`` (a window of the driving scan);
    ``rowid_column``: the table's rowid too, under that name."""
    cols = ", ".join(f"{quote(node.alias)}.{quote(c)} AS {quote(node.alias + '.' + c)}"
                     for c in node.columns)  # fmt: skip
    if rowid_column is not None:
        cols = f"{quote(node.alias)}.rowid AS {quote(rowid_column)}, {cols}"
    sql = f"SELECT {cols} FROM {node.table} AS {quote(node.alias)}"
    if rowids is not None:
        rowid = f"{quote(node.alias)}.rowid"
        sql += f" WHERE {rowid} >= {int(rowids[0])} AND {rowid} < {int(rowids[1])}"
    if node.filters:
        sql = f"SELECT * FROM ({sql}) WHERE " + " AND ".join(f.sql for f in node.filters)
    return sql


def join_sql(left: str, right: str, condition: str | None) -> str:
    if condition is None:
        return f"SELECT * FROM ({left}) AS __l CROSS JOIN ({right}) AS __r"
    return f"SELECT * FROM ({left}) AS __l JOIN ({right}) AS __r ON {condition}"
