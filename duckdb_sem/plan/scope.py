"""Name resolution for plan building: which attribute a column or template field means.

Names are resolved by the one resolver of :mod:`.fields`. Base columns become ``alias.column``
attributes; a ``sem_map`` output is the attribute named by its alias. Select aliases (outside
``sem_map``) stay plain identifiers, for DuckDB to resolve in GROUP BY, HAVING and ORDER BY.
A derived table (``(SELECT text AS body ...) AS r``) is a source whose names differ from its
scan's columns: ``r.body`` means the attribute ``r.text``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from duckdb_sem.errors import PlanError
from duckdb_sem.plan.fields import Name, resolve

__all__ = ["Scope", "Source"]


@dataclass(frozen=True)
class Source:
    table: str  # SQL of the table reference, e.g. ``main.reviews``
    alias: str  # the prefix of its attributes
    columns: tuple[str, ...]  # the columns its scan reads
    # (name, attribute) pairs the query sees; None: every column under its own name. A derived
    # table shows its select list (renamed columns, ``sem_map`` outputs) and hides the rest.
    names: tuple[tuple[str, str], ...] | None = None
    qualifier: str | None = None  # how SQL qualifies its columns, when not ``alias``

    def attr(self, column: str) -> str:
        return f"{self.alias}.{column}"

    @property
    def attrs(self) -> frozenset[str]:
        """The attributes of its scan."""
        return frozenset(self.attr(c) for c in self.columns)

    @property
    def visible(self) -> tuple[tuple[str, str], ...]:
        """(name, attribute) of every column the query may name."""
        if self.names is not None:
            return self.names
        return tuple((c, self.attr(c)) for c in self.columns)

    @property
    def name(self) -> str:
        return self.qualifier or self.alias


@dataclass
class Scope:
    sources: list[Source]
    maps: dict[str, str] = field(default_factory=dict)  # lower-case alias -> attribute
    select_aliases: set[str] = field(default_factory=set)  # lower-case

    def resolve(
        self, name: str, *, where: str, aliases: bool = False, template: bool = False
    ) -> str | None:
        """The attribute ``name`` (``col`` or ``alias.col``) means; None for a select alias.
        ``template``: ``name`` is a template field (errors write it ``{col}``)."""
        late: list[Name[str | None]] = [Name(alias, attr) for alias, attr in self.maps.items()]
        if aliases:
            late += [Name(alias, None) for alias in sorted(self.select_aliases)]
        names: list[Name[str | None]] = [
            Name(column, attr, (s.name,)) for s in self.sources for column, attr in s.visible
        ]
        return resolve(name, names, where=where, late=late, template=template)

    def rewrite(
        self, node: exp.Expr, *, where: str, aliases: bool = False
    ) -> tuple[exp.Expr, frozenset[str]]:
        """A copy of ``node`` over quoted attributes, and the attributes it reads."""
        if any(isinstance(n, exp.Subquery | exp.Select) for n in node.walk()):
            raise PlanError(f"{where}: subqueries are planned by DuckDB alone (UDF path)")
        tree = node.copy()
        reads: set[str] = set()
        for column in list(tree.find_all(exp.Column)):
            if isinstance(column.this, exp.Star):
                raise PlanError(f"{where}: '*' inside an expression is not planned")
            attr = self.resolve(
                ".".join(p.name for p in column.parts), where=where, aliases=aliases
            )
            if attr is None:
                continue
            reads.add(attr)
            replacement = exp.column(attr, quoted=True)
            if column is tree:
                tree = replacement
            else:
                column.replace(replacement)
        return tree, frozenset(reads)
