"""Immutable logical plan nodes.

Every node knows the attributes it ``reads`` and the new attributes it ``produces``; ``attrs``
is the schema of its output. Attributes are physical column names: ``alias.column`` for base
columns (e.g. ``r.text``) and the output name of a ``sem_map`` (e.g. ``topic``). Relational SQL
fragments stored in nodes refer to attributes as quoted identifiers (``"r.text"``).

Row-wise operators (``Filter``, ``SemFilter``, ``SemMap``) act on each row alone and may commute
with each other and with inner joins; set-wise operators (``Aggregate``, ``Project`` with
``DISTINCT``, ``Sort``, ``Limit``, ``SemAgg``) never move. Constructors validate invariants, so
an ill-formed plan cannot be built.

Example:
    >>> scan = Scan("reviews", "r", ("id", "text"))
    >>> SemFilter(scan, SemCall("{0} is positive", ("r.text",))).reads
    frozenset({'r.text'})
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

from duckdb_sem.errors import PlanError
from duckdb_sem.llm.request import OperatorKind

__all__ = [
    "Aggregate",
    "Filter",
    "Join",
    "Limit",
    "Node",
    "Predicate",
    "Project",
    "ProjectItem",
    "Scan",
    "SemAgg",
    "SemCall",
    "SemFilter",
    "SemJoin",
    "SemMap",
    "Sort",
    "quote",
]


def quote(attr: str) -> str:
    """The SQL identifier of an attribute: ``r.text`` -> ``"r.text"``."""
    return '"' + attr.replace('"', '""') + '"'


@dataclass(frozen=True)
class Predicate:
    """A relational boolean SQL expression over quoted attributes."""

    sql: str
    reads: frozenset[str]

    def __post_init__(self) -> None:
        if not self.sql.strip():
            raise PlanError("empty predicate")


@dataclass(frozen=True)
class SemCall:
    """A semantic call in positional form: ``template`` uses ``{0}``, ``{1}`` over ``args``."""

    template: str
    args: tuple[str, ...]
    kind: OperatorKind = OperatorKind.FILTER
    output_type: str | None = None

    def __post_init__(self) -> None:
        if not self.template.strip():
            raise PlanError("empty semantic template")
        for i in range(len(self.args)):
            if "{" + str(i) + "}" not in self.template:
                raise PlanError(f"template {self.template!r} does not use argument {{{i}}}")

    @property
    def reads(self) -> frozenset[str]:
        return frozenset(self.args)

    def sql(self) -> str:
        name = "sem_" + self.kind.value
        parts = [repr(self.template), *self.args]
        if self.output_type:
            parts.append(repr(self.output_type))
        return f"{name}({', '.join(parts)})"


@dataclass(frozen=True)
class Node:
    """Base of every plan node."""

    row_wise: ClassVar[bool] = False
    semantic: ClassVar[bool] = False

    @property
    def children(self) -> tuple[Node, ...]:
        return ()

    @property
    def reads(self) -> frozenset[str]:
        return frozenset()

    @property
    def produces(self) -> frozenset[str]:
        return frozenset()

    @cached_property
    def attrs(self) -> frozenset[str]:
        out: frozenset[str] = frozenset().union(*(c.attrs for c in self.children))
        return out | self.produces

    def with_children(self, *children: Node) -> Node:
        raise PlanError(f"{type(self).__name__} has no children")

    def label(self) -> str:
        return type(self).__name__

    def walk(self) -> Iterator[Node]:
        """Pre-order traversal."""
        yield self
        for child in self.children:
            yield from child.walk()

    def _check_reads(self) -> None:
        missing = self.reads - frozenset().union(*(c.attrs for c in self.children))
        if missing:
            raise PlanError(
                f"{type(self).__name__} reads {sorted(missing)}, which its input does not have"
            )


@dataclass(frozen=True)
class Scan(Node):
    table: str
    alias: str
    columns: tuple[str, ...]
    filters: tuple[Predicate, ...] = ()

    def __post_init__(self) -> None:
        if not self.columns or len(set(self.columns)) != len(self.columns):
            raise PlanError(f"scan of {self.table} needs distinct columns")
        for pred in self.filters:
            if not pred.reads <= self.produces:
                raise PlanError(f"scan filter {pred.sql} reads columns outside {self.alias}")

    @property
    def produces(self) -> frozenset[str]:
        return frozenset(f"{self.alias}.{c}" for c in self.columns)

    def label(self) -> str:
        where = " WHERE " + " AND ".join(p.sql for p in self.filters) if self.filters else ""
        name = self.table if self.table == self.alias else f"{self.table} AS {self.alias}"
        return f"Scan {name}{where}"


@dataclass(frozen=True)
class _Unary(Node):
    child: Node

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    def with_children(self, *children: Node) -> Node:
        (child,) = children
        return dataclasses.replace(self, child=child)


@dataclass(frozen=True)
class Filter(_Unary):
    predicate: Predicate
    row_wise: ClassVar[bool] = True

    def __post_init__(self) -> None:
        self._check_reads()

    @property
    def reads(self) -> frozenset[str]:
        return self.predicate.reads

    def label(self) -> str:
        return f"Filter {self.predicate.sql}"


@dataclass(frozen=True)
class SemFilter(_Unary):
    call: SemCall
    row_wise: ClassVar[bool] = True
    semantic: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.call.kind not in (OperatorKind.FILTER, OperatorKind.JOIN):
            raise PlanError("SemFilter needs a filter or join call")
        self._check_reads()

    @property
    def reads(self) -> frozenset[str]:
        return self.call.reads

    def label(self) -> str:
        return f"SemFilter {self.call.sql()}"


@dataclass(frozen=True)
class SemMap(_Unary):
    call: SemCall
    output: str
    row_wise: ClassVar[bool] = True
    semantic: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.call.kind is not OperatorKind.MAP:
            raise PlanError("SemMap needs a map call")
        self._check_reads()
        if self.output in self.child.attrs:
            raise PlanError(f"sem_map output {self.output!r} already exists in its input")

    @property
    def reads(self) -> frozenset[str]:
        return self.call.reads

    @property
    def produces(self) -> frozenset[str]:
        return frozenset({self.output})

    def label(self) -> str:
        return f"SemMap {self.output} := {self.call.sql()}"


@dataclass(frozen=True)
class _Binary(Node):
    left: Node
    right: Node

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    def with_children(self, *children: Node) -> Node:
        left, right = children
        return dataclasses.replace(self, left=left, right=right)

    def _check_sides(self) -> None:
        if self.left.attrs & self.right.attrs:
            raise PlanError(
                f"join sides share attributes {sorted(self.left.attrs & self.right.attrs)}"
            )
        self._check_reads()


@dataclass(frozen=True)
class Join(_Binary):
    """An inner join (a cross join when ``condition`` is None)."""

    condition: Predicate | None = None

    def __post_init__(self) -> None:
        self._check_sides()

    @property
    def reads(self) -> frozenset[str]:
        return self.condition.reads if self.condition else frozenset()

    def label(self) -> str:
        return f"Join ON {self.condition.sql}" if self.condition else "CrossJoin"


@dataclass(frozen=True)
class SemJoin(_Binary):
    """Pairs of rows (optionally prefiltered by a relational ``condition``) kept by an LLM."""

    call: SemCall
    condition: Predicate | None = None
    semantic: ClassVar[bool] = True

    def __post_init__(self) -> None:
        self._check_sides()
        if not (self.call.reads & self.left.attrs and self.call.reads & self.right.attrs):
            raise PlanError("a semantic join must read columns of both sides")

    @property
    def reads(self) -> frozenset[str]:
        extra = self.condition.reads if self.condition else frozenset()
        return self.call.reads | extra

    def label(self) -> str:
        on = f" ON {self.condition.sql}" if self.condition else ""
        return f"SemJoin {self.call.sql()}{on}"


@dataclass(frozen=True)
class Aggregate(_Unary):
    """GROUP BY ``keys`` (SQL over attributes or select aliases) with an optional HAVING."""

    keys: tuple[str, ...]
    having: str | None = None
    key_reads: frozenset[str] = frozenset()

    @property
    def reads(self) -> frozenset[str]:
        return self.key_reads

    def label(self) -> str:
        having = f" HAVING {self.having}" if self.having else ""
        return f"Aggregate BY {', '.join(self.keys) or '()'}{having}"


@dataclass(frozen=True)
class ProjectItem:
    sql: str
    name: str
    reads: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Project(_Unary):
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
class Sort(_Unary):
    keys: tuple[str, ...]

    def label(self) -> str:
        return f"Sort {', '.join(self.keys)}"


@dataclass(frozen=True)
class Limit(_Unary):
    limit: int | None
    offset: int = 0

    def __post_init__(self) -> None:
        if (self.limit is not None and self.limit < 0) or self.offset < 0:
            raise PlanError("LIMIT and OFFSET must not be negative")

    def label(self) -> str:
        off = f" OFFSET {self.offset}" if self.offset else ""
        return f"Limit {self.limit if self.limit is not None else 'ALL'}{off}"


@dataclass(frozen=True)
class SemAgg(_Unary):
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
