"""Name resolution for plan building: which attribute a column or template field means.

Base columns become ``alias.column`` attributes; a ``sem_map`` output is the attribute named by
its alias. Select aliases (outside ``sem_map``) stay plain identifiers, for DuckDB to resolve in
GROUP BY, HAVING and ORDER BY.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from duckdb_sem.errors import AmbiguousColumnError, PlanError, UnknownColumnError

__all__ = ["Scope", "Source"]


@dataclass(frozen=True)
class Source:
    table: str  # SQL of the table reference, e.g. ``main.reviews``
    alias: str
    columns: tuple[str, ...]

    def attr(self, column: str) -> str:
        return f"{self.alias}.{column}"

    @property
    def attrs(self) -> frozenset[str]:
        return frozenset(self.attr(c) for c in self.columns)


@dataclass
class Scope:
    sources: list[Source]
    maps: dict[str, str] = field(default_factory=dict)  # lower-case alias -> attribute
    select_aliases: set[str] = field(default_factory=set)  # lower-case

    def resolve(self, name: str, *, where: str, aliases: bool = False) -> str | None:
        """The attribute ``name`` (``col`` or ``alias.col``) means; None for a select alias."""
        qualifier, _, column = name.rpartition(".")
        qualifier, column = qualifier.strip('"'), column.strip('"')
        if qualifier:
            matches = [s for s in self.sources if s.alias.lower() == qualifier.lower()]
            if not matches:
                have = ", ".join(s.alias for s in self.sources)
                raise UnknownColumnError(
                    f"{where}: no table or alias {qualifier!r} in scope (have: {have})"
                )
        else:
            matches = self.sources
        hits = [(s, c) for s in matches for c in s.columns if c.lower() == column.lower()]
        if len(hits) > 1:
            options = " or ".join(f"{s.alias}.{c}" for s, c in hits)
            raise AmbiguousColumnError(f"{where}: {name!r} is ambiguous; write {options}")
        if hits:
            source, real = hits[0]
            return source.attr(real)
        if not qualifier and column.lower() in self.maps:
            return self.maps[column.lower()]
        if not qualifier and aliases and column.lower() in self.select_aliases:
            return None
        available = ", ".join(sorted(a for s in matches for a in s.attrs))
        raise UnknownColumnError(f"{where}: unknown column {name!r}; available: {available}")

    def rewrite(
        self, node: exp.Expr, *, where: str, aliases: bool = False
    ) -> tuple[str, frozenset[str]]:
        """SQL of ``node`` over quoted attributes, and the attributes it reads."""
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
        sql = tree.sql(dialect="duckdb", normalize_functions=False)
        return sql, frozenset(reads)
