"""What a read of a PostgreSQL table needs: its columns, and the predicates PostgreSQL can run.

For each reference to an attached table, the columns the query uses (including ``{col}``
fields inside semantic templates) are projected, and the WHERE conjuncts of the same SELECT
that only compare this table's columns with constants are sent to PostgreSQL. DuckDB still
applies every predicate, so pushing one down can only shrink the transfer, never change a
result. Nothing is pushed into the nullable side of an outer join.

Example:
    ``SELECT id FROM pg.public.reviews r WHERE r.stars >= 4 AND sem_filter('{text} is positive')``
    reads ``SELECT "id", "stars", "text" FROM "public"."reviews" WHERE "stars" >= 4``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

__all__ = ["ScanNeeds", "scan_needs"]

_FIELD = re.compile(r"\{([^{}]+)\}")
_SAFE_NODES = (
    exp.Column,
    exp.Identifier,
    exp.Literal,
    exp.Boolean,
    exp.Null,
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.Is,
    exp.Not,
    exp.And,
    exp.Or,
    exp.In,
    exp.Between,
    exp.Like,
    exp.ILike,
    exp.Paren,
    exp.Neg,
)


@dataclass(frozen=True, slots=True)
class ScanNeeds:
    columns: tuple[str, ...]  # in the table's order
    where: str | None  # PostgreSQL SQL, or None


def _owned(column: exp.Column, ref: str, alone: bool, names: set[str]) -> bool:
    if column.name.lower() not in names:
        return False
    qualifier = column.table
    return qualifier.lower() == ref.lower() if qualifier else alone


def _template_fields(root: exp.Expr) -> set[str]:
    fields: set[str] = set()
    for literal in root.find_all(exp.Literal):
        if literal.is_string and "{" in literal.this:
            for field in _FIELD.findall(literal.this):
                fields.add(field.split(".")[-1].strip().lower())
    return fields


def _pushable(node: exp.Expr, ref: str, alone: bool, names: set[str]) -> bool:
    for sub in node.walk():
        if not isinstance(sub, _SAFE_NODES):
            return False
        if isinstance(sub, exp.Column) and not _owned(sub, ref, alone, names):
            return False
    return any(isinstance(sub, exp.Column) for sub in node.walk())


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.And):
        return _conjuncts(node.left) + _conjuncts(node.right)
    if isinstance(node, exp.Paren) and isinstance(node.this, exp.And):
        return _conjuncts(node.this)
    return [node]


def _postgres_sql(node: exp.Expr) -> str:
    copy = node.copy()
    for column in list(copy.find_all(exp.Column)):
        column.replace(exp.column(column.name, quoted=True))
    return str(copy.sql(dialect="postgres"))


def scan_needs(root: exp.Expr, table: exp.Table, columns: Sequence[str]) -> ScanNeeds:
    """Columns and pushable predicates for ``table`` (a node inside ``root``)."""
    names = {c.lower() for c in columns}
    ref = table.alias_or_name
    select = table.find_ancestor(exp.Select)
    joins = select.args.get("joins") if select is not None else None
    alone = select is not None and not joins
    # Projection: every column this query might read from this table.
    wanted: set[str] = set()
    everything = False
    for star in root.find_all(exp.Star):
        parent = star.parent
        if isinstance(parent, exp.Count):
            continue
        qualifier = parent.table if isinstance(parent, exp.Column) else ""
        if (not qualifier or qualifier.lower() == ref.lower()) and star.find_ancestor(
            exp.Select
        ) is select:
            everything = True
    for column in root.find_all(exp.Column):
        if column.name.lower() in names and (not column.table or column.table == ref):
            wanted.add(column.name.lower())
    wanted |= _template_fields(root) & names
    chosen = [c for c in columns if everything or c.lower() in wanted] or list(columns[:1])
    # Predicates: WHERE conjuncts of this SELECT, unless the table may be null-extended.
    where_sql: str | None = None
    outer = any(j.side for j in joins or ())
    where = select.args.get("where") if select is not None else None
    if where is not None and not outer:
        parts = [c for c in _conjuncts(where.this) if _pushable(c, ref, alone, names)]
        if parts:
            where_sql = " AND ".join(f"({_postgres_sql(p)})" for p in parts)
    return ScanNeeds(tuple(chosen), where_sql)
