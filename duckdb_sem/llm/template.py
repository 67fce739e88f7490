"""Prompt templates: ``'{abstract} is about {r.topic}'``.

A field is ``{name}``, ``{alias.name}`` or a position ``{0}``; ``{{`` and ``}}`` are literal
braces. Templates are parsed once at bind time, so a malformed template is an error before any
LLM call.

Example:
    >>> t = parse_template("{title}: is {{this}} about {r.topic}?")
    >>> t.fields
    ('title', 'r.topic')
    >>> t.positional().render(["Dune", "sand"])
    'Dune: is {this} about sand?'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from duckdb_sem.errors import TemplateError

__all__ = ["Template", "parse_template"]

_FIELD = re.compile(r'^(?:\d+|[A-Za-z_"][\w" ]*(?:\.[A-Za-z_"][\w" ]*)*)$')


@dataclass(frozen=True, slots=True)
class Template:
    """Literal text pieces interleaved with field names: ``len(pieces) == len(fields) + 1``."""

    source: str
    pieces: tuple[str, ...]
    fields: tuple[str, ...]

    @property
    def is_positional(self) -> bool:
        return all(f.isdigit() for f in self.fields)

    def positional(self) -> Template:
        """The same template with each distinct field replaced by its position ``{i}``."""
        order: dict[str, int] = {}
        for name in self.fields:
            order.setdefault(name, len(order))
        return self.with_fields(tuple(str(order[name]) for name in self.fields))

    def distinct_fields(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.fields))

    def with_fields(self, fields: tuple[str, ...]) -> Template:
        if len(fields) != len(self.fields):
            raise ValueError("field count must not change")
        return Template(_join(self.pieces, fields), self.pieces, fields)

    def render(self, values: Sequence[str]) -> str:
        """Fill a positional template with one row's values (already converted to text)."""
        out = [self.pieces[0]]
        for field, piece in zip(self.fields, self.pieces[1:], strict=True):
            index = int(field)
            if index >= len(values):
                raise TemplateError(
                    f"template {self.source!r} uses {{{index}}} but only {len(values)} "
                    "argument(s) were passed; pass one column per position"
                )
            out.append(values[index])
            out.append(piece)
        return "".join(out)


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _join(pieces: tuple[str, ...], fields: tuple[str, ...]) -> str:
    out = [_escape(pieces[0])]
    for field, piece in zip(fields, pieces[1:], strict=True):
        out.append("{" + field + "}")
        out.append(_escape(piece))
    return "".join(out)


def parse_template(source: str) -> Template:
    """Parse a template; raise :class:`TemplateError` saying what is wrong and where."""
    if not isinstance(source, str) or not source.strip():
        raise TemplateError(
            "empty prompt template; write an instruction such as '{text} is positive'"
        )
    pieces: list[str] = []
    fields: list[str] = []
    buf: list[str] = []
    i, n = 0, len(source)
    while i < n:
        ch = source[i]
        if ch == "{" and source.startswith("{{", i):
            buf.append("{")
            i += 2
        elif ch == "}" and source.startswith("}}", i):
            buf.append("}")
            i += 2
        elif ch == "{":
            end = source.find("}", i + 1)
            if end < 0:
                raise TemplateError(
                    f"unclosed '{{' at position {i} in template {source!r}; "
                    "close the field with '}' or write '{{' for a literal brace"
                )
            name = source[i + 1 : end].strip()
            if not name or not _FIELD.match(name):
                raise TemplateError(
                    f"bad field {{{source[i + 1 : end]}}} in template {source!r}; "
                    "use {column}, {alias.column} or {0}"
                )
            pieces.append("".join(buf))
            buf = []
            fields.append(name)
            i = end + 1
        elif ch == "}":
            raise TemplateError(
                f"unmatched '}}' at position {i} in template {source!r}; write '}}}}' for a literal brace"
            )
        else:
            buf.append(ch)
            i += 1
    pieces.append("".join(buf))
    return Template(source, tuple(pieces), tuple(fields))
