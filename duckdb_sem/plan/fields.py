"""The one resolver of names: what a template field ``{col}`` or ``{t.col}`` (or a column in
SQL) means, for every entry that binds one.

The planner (:mod:`.scope`), the UDF rewrite (``surface.bind``), the semantic table functions
(``surface.table_functions``) and the relation API (``relation_chain``) each list the names in
scope as :class:`Name` s and call :func:`resolve`; so a field means the same thing, and a bad
one gets the same error, whichever way the query came in. The rules:

1. A field is ``column`` or ``qualifier.column``; quotes are stripped and case is ignored.
2. A qualifier selects the names whose ``qualifiers`` hold it (a table, an alias, or a join
   side such as ``l``/``r``); if it selects none, the error lists the qualifiers in scope.
3. Among the selected names, exactly one match is the answer; two or more are ambiguous, and
   the error lists the qualified forms to write instead.
4. An unqualified field that matches no name is looked up among the ``late`` names (select-list
   aliases, ``sem_map`` outputs), which never make a field ambiguous.
5. Otherwise the column is unknown; the error lists what is available.

Example:
    >>> names = [Name("text", "r.text", ("r",)), Name("text", "m.text", ("m",))]
    >>> resolve("r.text", names, where="template '{r.text} is good'")
    'r.text'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from duckdb_sem.errors import AmbiguousColumnError, UnknownColumnError

__all__ = ["Name", "resolve", "split_field"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Name(Generic[T]):
    """One name a field may mean, and what it is bound to."""

    column: str  # the name an unqualified field matches
    target: T  # what the caller binds the field to (an attribute, an expression, ...)
    qualifiers: tuple[str, ...] = ()  # what may qualify it; the first is how an error writes it
    qualified: str | None = None  # the name a qualified field matches, when not ``column``

    def selected_by(self, qualifier: str) -> bool:
        return not qualifier or any(q.lower() == qualifier.lower() for q in self.qualifiers)

    def matches(self, column: str, qualifier: str) -> bool:
        own = self.qualified if qualifier and self.qualified is not None else self.column
        return own.lower() == column.lower() and self.selected_by(qualifier)

    def written(self, *, braces: bool = True) -> str:
        """The field that names this one without ambiguity, e.g. ``{r.text}``."""
        text = self.column
        if self.qualifiers:
            text = f"{self.qualifiers[0]}.{self.qualified or self.column}"
        return "{" + text + "}" if braces else text


def split_field(field: str) -> tuple[str, str]:
    """``(qualifier, column)`` of ``t.col``, ``"t"."col"`` or ``col`` (qualifier ``''``)."""
    qualifier, _, column = field.rpartition(".")
    return qualifier.strip('"'), column.strip('"')


def resolve(
    field: str,
    names: Sequence[Name[T]],
    *,
    where: str,
    late: Sequence[Name[T]] = (),
    template: bool = True,
) -> T:
    """The target of ``field`` among ``names`` (then ``late``); see the module docstring.
    ``template`` False: ``field`` is a column of SQL text, and errors quote it as such."""
    qualifier, column = split_field(field)
    shown = "{" + field + "}" if template else repr(field)
    selected = [name for name in names if name.selected_by(qualifier)]
    if qualifier and not selected:
        have = ", ".join(dict.fromkeys(n.qualifiers[0] for n in names if n.qualifiers))
        raise UnknownColumnError(
            f"{where}: no table or alias {qualifier!r} in scope (have: {have or 'none'})"
        )
    hits = [name for name in selected if name.matches(column, qualifier)]
    if len(hits) > 1:
        options = " or ".join(dict.fromkeys(h.written(braces=template) for h in hits))
        raise AmbiguousColumnError(f"{where}: {shown} is ambiguous; write {options}")
    if hits:
        return hits[0].target
    if not qualifier:
        for name in late:
            if name.column.lower() == column.lower():
                return name.target
    available = ", ".join(n.written(braces=False) for n in selected)
    raise UnknownColumnError(f"{where}: unknown column {shown}; available: {available or 'none'}")
