"""The query a ``SemRelation`` chain builds: one flat SELECT over its sources.

A :class:`Chain` is immutable: its sources (a table, view or registered name, each under an
alias), the WHERE conjuncts, and the ``sem_map`` items, each new one appended by a relation
method. :meth:`Chain.call` binds a template's named fields to the chain's columns (by the one
resolver, ``plan.fields``) and writes the call in explicit positional form; columns two sources share are renamed ``col_1`` ...

Example: a chain over ``reviews`` with ``sem_filter('{text} is positive')`` writes::

    SELECT "reviews".* FROM reviews AS "reviews"
    WHERE sem_filter('{0} is positive', "reviews"."text")
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from duckdb_sem.errors import BindError
from duckdb_sem.identifiers import quote_identifier as quote_name
from duckdb_sem.llm.template import parse_template
from duckdb_sem.plan.fields import Name, resolve

__all__ = ["Chain", "ChainSource", "quote_name"]

_SIDES = (("l", "left"), ("r", "right"))  # how a sem_join template names its two sides


@dataclass(frozen=True)
class ChainSource:
    ref: str  # SQL of a table, view or registered name
    alias: str
    columns: tuple[str, ...]


@dataclass(frozen=True)
class Chain:
    """One flat SELECT under construction."""

    sources: tuple[ChainSource, ...]
    where: tuple[str, ...] = ()
    maps: tuple[tuple[str, str], ...] = ()  # (output name, call SQL)

    def outputs(self) -> list[tuple[str, str, ChainSource | None, str]]:
        """(output name, SQL expression, source, source column) of every output column."""
        out: list[tuple[str, str, ChainSource | None, str]] = []
        taken: set[str] = set()
        for src in self.sources:
            for col in src.columns:
                name, n = col, 0
                while name.lower() in taken:
                    n += 1
                    name = f"{col}_{n}"
                taken.add(name.lower())
                out.append((name, f"{quote_name(src.alias)}.{quote_name(col)}", src, col))
        out += [(name, quote_name(name), None, name) for name, _ in self.maps]
        return out

    def sql(self) -> str:
        if len(self.sources) == 1:
            items = [f"{quote_name(self.sources[0].alias)}.*"]
        else:
            items = [
                f"{e} AS {quote_name(n)}" for n, e, src, _ in self.outputs() if src is not None
            ]
        items += [f"{call} AS {quote_name(name)}" for name, call in self.maps]
        return f"SELECT {', '.join(items)} {self.from_where()}"

    def from_where(self) -> str:
        froms = " CROSS JOIN ".join(f"{s.ref} AS {quote_name(s.alias)}" for s in self.sources)
        return f"FROM {froms}" + (" WHERE " + " AND ".join(self.where) if self.where else "")

    def call(self, fn: str, template: str, sides: dict[int, tuple[str, ...]] | None = None,
             extra: str = "", lead: str = "") -> str:  # fmt: skip
        """``fn('{0} ...', cols...)``: the template's fields bound to this chain's columns;
        ``lead`` is SQL put right after the template (``sem_classify``'s labels)."""
        parsed = parse_template(template)
        if parsed.is_positional:
            raise BindError(f"{fn}: name columns in the template, e.g. '{{text}}': {template!r}")
        side_of = {a.lower(): i for i, aliases in (sides or {}).items() for a in aliases}
        names: list[Name[str]] = []
        for name, sql, src, col in self.outputs():
            if src is None:  # a sem_map output: named only by its own name
                names.append(Name(name, sql))
                continue
            side = side_of.get(src.alias.lower())
            qualifiers = (src.alias, *(_SIDES[side] if side is not None else ()))
            names.append(Name(name, sql, qualifiers, qualified=col))
        where = f"{fn} template {template!r}"
        args = [resolve(field, names, where=where) for field in parsed.distinct_fields()]
        literal = exp.Literal.string(parsed.positional().source).sql(dialect="duckdb")
        return f"{fn}({', '.join([literal, *([lead] if lead else []), *args])}{extra})"
