"""What plan nodes hold: relational predicates, semantic calls, projection items.

Relational SQL fragments refer to attributes as quoted identifiers (:func:`quote`); a
:class:`SemCall` is a semantic call in positional form over attribute arguments.

Example:
    >>> SemCall("{0} is about {1}", ("r.text", "m.title"), OperatorKind.JOIN).sql()
    "sem_join('{0} is about {1}', r.text, m.title)"
"""

from __future__ import annotations

from dataclasses import dataclass

from duckdb_sem.errors import PlanError
from duckdb_sem.identifiers import quote_identifier as quote
from duckdb_sem.llm.request import OperatorKind

__all__ = ["Predicate", "ProjectItem", "SemCall", "quote"]


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
    #: a ``sem_classify``'s labels (a map whose answer is one of them); () otherwise
    labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.template.strip():
            raise PlanError("empty semantic template")
        if self.labels and self.kind is not OperatorKind.MAP:
            raise PlanError("only a map (sem_classify) chooses among labels")
        for i in range(len(self.args)):
            if "{" + str(i) + "}" not in self.template:
                raise PlanError(f"template {self.template!r} does not use argument {{{i}}}")

    @property
    def reads(self) -> frozenset[str]:
        return frozenset(self.args)

    def sql(self) -> str:
        if self.labels:
            return f"sem_classify({', '.join([repr(self.template), repr(list(self.labels)), *self.args])})"
        name = "sem_" + self.kind.value
        parts = [repr(self.template), *self.args]
        if self.output_type:
            parts.append(repr(self.output_type))
        return f"{name}({', '.join(parts)})"


@dataclass(frozen=True)
class ProjectItem:
    sql: str
    name: str
    reads: frozenset[str] = frozenset()
