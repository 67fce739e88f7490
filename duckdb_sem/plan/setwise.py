"""Set-wise plan nodes: the sink of a plan, which never moves.

``Aggregate`` (GROUP BY, HAVING), ``Project`` (the select list, DISTINCT), ``Sort``, ``Limit``
and ``SemAgg`` act on the whole input, so the commutation rules never swap them with anything;
the optimizer enumerates only the row-wise region below them.

Example:
    >>> from duckdb_sem.plan.nodes import Scan
    >>> Limit(Scan("reviews", "r", ("id",)), 10).label()
    'Limit 10'
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

from sqlglot import exp

from duckdb_sem.errors import PlanError
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.plan.base import Unary
from duckdb_sem.plan.expressions import ProjectItem, SemCall, quote, render

__all__ = ["Aggregate", "Limit", "Project", "SemAgg", "Sort"]


@dataclass(frozen=True)
class Aggregate(Unary):
    """GROUP BY ``keys`` (ASTs over attributes or select aliases) with an optional HAVING."""

    keys: tuple[exp.Expr, ...]
    having: exp.Expr | None = None
    key_reads: frozenset[str] = frozenset()

    @property
    def reads(self) -> frozenset[str]:
        return self.key_reads

    @cached_property
    def key_sql(self) -> tuple[str, ...]:
        return tuple(render(k) for k in self.keys)

    @cached_property
    def having_sql(self) -> str | None:
        return render(self.having) if self.having is not None else None

    def label(self) -> str:
        having = f" HAVING {self.having_sql}" if self.having_sql else ""
        return f"Aggregate BY {', '.join(self.key_sql) or '()'}{having}"


@dataclass(frozen=True)
class Project(Unary):
    items: tuple[ProjectItem, ...]
    distinct: bool = False

    def __post_init__(self) -> None:
        if not self.items:
            raise PlanError("a projection needs at least one item")

    @property
    def reads(self) -> frozenset[str]:
        return frozenset().union(*(i.reads for i in self.items))

    @cached_property
    def attrs(self) -> frozenset[str]:
        return frozenset(i.name for i in self.items)

    def label(self) -> str:
        head = "Project DISTINCT" if self.distinct else "Project"
        return f"{head} {', '.join(i.sql if i.sql == quote(i.name) else f'{i.sql} AS {i.name}' for i in self.items)}"


@dataclass(frozen=True)
class Sort(Unary):
    keys: tuple[exp.Expr, ...]  # ASTs over attributes or select aliases, with their direction
    # per key, the attributes it reads; None for a key that reads a select-list alias or no
    # column at all (so it is not known before the row-wise operators have run)
    key_reads: tuple[frozenset[str] | None, ...] = ()

    def __post_init__(self) -> None:
        if self.key_reads and len(self.key_reads) != len(self.keys):
            raise PlanError("a sort needs the reads of every key, or of none")

    @cached_property
    def key_sql(self) -> tuple[str, ...]:
        return tuple(render(k) for k in self.keys)

    def label(self) -> str:
        return f"Sort {', '.join(self.key_sql)}"


@dataclass(frozen=True)
class Limit(Unary):
    limit: int | None
    offset: int = 0

    def __post_init__(self) -> None:
        if (self.limit is not None and self.limit < 0) or self.offset < 0:
            raise PlanError("LIMIT and OFFSET must not be negative")

    def label(self) -> str:
        off = f" OFFSET {self.offset}" if self.offset else ""
        return f"Limit {self.limit if self.limit is not None else 'ALL'}{off}"


@dataclass(frozen=True)
class SemAgg(Unary):
    """``sem_agg`` over each group: ``call.args`` are list columns made by the projection below."""

    call: SemCall
    output: str
    semantic: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.call.kind is not OperatorKind.AGG:
            raise PlanError("SemAgg needs an agg call")
        self._check_reads()

    @property
    def reads(self) -> frozenset[str]:
        return self.call.reads

    @property
    def produces(self) -> frozenset[str]:
        return frozenset({self.output})

    @cached_property
    def attrs(self) -> frozenset[str]:
        return (self.child.attrs - self.call.reads) | {self.output}

    def label(self) -> str:
        return f"SemAgg {self.output} := {self.call.sql()}"
