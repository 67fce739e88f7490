"""Immutable logical plan nodes.

Every node knows the attributes it ``reads`` and the new attributes it ``produces``; ``attrs``
is the schema of its output. Attributes are physical column names: ``alias.column`` for base
columns (e.g. ``r.text``) and the output name of a ``sem_map`` (e.g. ``topic``). Relational
expressions stored in nodes are sqlglot ASTs whose columns are quoted attributes (``"r.text"``),
rendered to SQL once, when the runtime first needs them.

Row-wise operators (``Filter``, ``SemFilter``, ``SemMap``) act on each row alone and may commute
with each other and with inner joins; set-wise operators (``Aggregate``, ``Project`` with
``DISTINCT``, ``Sort``, ``Limit``, ``SemAgg``) never move. Constructors validate invariants, so
an ill-formed plan cannot be built.

This module holds the scan, the row-wise operators and the joins, and re-exports the rest:
the base classes (:mod:`.base`), the set-wise sink (:mod:`.setwise`) and what nodes hold
(:mod:`.expressions`: predicates, semantic calls, projection items).

Example:
    >>> scan = Scan("reviews", "r", ("id", "text"))
    >>> SemFilter(scan, SemCall("{0} is positive", ("r.text",))).reads
    frozenset({'r.text'})
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from duckdb_sem.errors import PlanError
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.plan.base import Binary, Node, Unary
from duckdb_sem.plan.blocking import Blocking
from duckdb_sem.plan.cascade import Cascade
from duckdb_sem.plan.expressions import Predicate, ProjectItem, SemCall, quote
from duckdb_sem.plan.setwise import Aggregate, Limit, Project, SemAgg, Sort

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
class Filter(Unary):
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
class SemFilter(Unary):
    """A semantic predicate; with ``cascade`` (an approximate plan) a helper decides the rows
    it is sure of and the target model the rest."""

    call: SemCall
    cascade: Cascade | None = None
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
        cascaded = f" {self.cascade.label()}" if self.cascade else ""
        return f"SemFilter {self.call.sql()}{cascaded}"


@dataclass(frozen=True)
class SemMap(Unary):
    call: SemCall
    output: str
    row_wise: ClassVar[bool] = True
    semantic: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.call.kind is OperatorKind.AGG:  # a filter's or join's answer as a BOOLEAN value
            raise PlanError("SemMap needs a map, filter or join call")
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
class Join(Binary):
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
class SemJoin(Binary):
    """Pairs of rows (optionally prefiltered by a relational ``condition``) kept by an LLM;
    with ``blocking`` (an approximate plan) only the pairs similar enough reach the LLM, and
    with ``cascade`` a helper decides the candidate pairs it is sure of, the LLM the rest."""

    call: SemCall
    condition: Predicate | None = None
    blocking: Blocking | None = None
    cascade: Cascade | None = None
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
        blocked = f" {self.blocking.label()}" if self.blocking else ""
        cascaded = f" {self.cascade.label()}" if self.cascade else ""
        return f"SemJoin {self.call.sql()}{on}{blocked}{cascaded}"
