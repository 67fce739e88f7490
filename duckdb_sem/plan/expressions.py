"""What plan nodes hold: relational predicates, semantic calls, projection items.

Relational expressions are sqlglot ASTs whose columns are quoted attributes (:func:`quote`),
rendered to SQL text once, when first needed; a :class:`SemCall` is a semantic call in
positional form over attribute arguments.

Example:
    >>> SemCall("{0} is about {1}", ("r.text", "m.title"), OperatorKind.JOIN).sql()
    "sem_join('{0} is about {1}', r.text, m.title)"
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import sqlglot
from sqlglot import exp

from duckdb_sem.errors import PlanError
from duckdb_sem.identifiers import quote_identifier as quote
from duckdb_sem.llm.call_options import DEFAULT_OPTIONS, CallOptions
from duckdb_sem.llm.request import OperatorKind

__all__ = ["Predicate", "ProjectItem", "SemCall", "parse_sql", "quote", "render"]


def render(tree: exp.Expr) -> str:
    """SQL text of a plan node's expression (DuckDB dialect, function names as written)."""
    out: str = tree.sql(dialect="duckdb", normalize_functions=False)
    return out


def parse_sql(text: str) -> exp.Expr:
    """The AST of a hand-written SQL fragment over quoted attributes (tests, examples)."""
    try:
        return sqlglot.parse_one(text, dialect="duckdb")
    except sqlglot.errors.ParseError as err:
        raise PlanError(f"cannot parse the SQL fragment {text!r}: {err}") from None


@dataclass(frozen=True)
class Predicate:
    """A relational boolean expression over quoted attributes: the sqlglot AST the plan builder
    made, rendered to SQL text once, the first time the runtime (or a label) needs it."""

    expr: exp.Expr
    reads: frozenset[str]

    @classmethod
    def parse(cls, text: str, reads: frozenset[str]) -> Predicate:
        return cls(parse_sql(text), reads)

    @cached_property
    def sql(self) -> str:
        return render(self.expr)


@dataclass(frozen=True)
class SemCall:
    """A semantic call in positional form: ``template`` uses ``{0}``, ``{1}`` over ``args``;
    ``options``: its ``model :=`` / ``temperature :=`` / ``max_tokens :=``."""

    template: str
    args: tuple[str, ...]
    kind: OperatorKind = OperatorKind.FILTER
    output_type: str | None = None
    options: CallOptions = DEFAULT_OPTIONS
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
        return f"{name}({', '.join(parts)}{self.options.sql_args()})"


@dataclass(frozen=True)
class ProjectItem:
    """One select-list item: its expression (an AST, rendered once) under ``name``."""

    expr: exp.Expr
    name: str
    reads: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, text: str, name: str, reads: frozenset[str] = frozenset()) -> ProjectItem:
        return cls(parse_sql(text), name, reads)

    @cached_property
    def sql(self) -> str:
        return render(self.expr)
