"""Prompts that ``install(con)``'s peer macros build in Python: BigQuery's tuples, Flock's objects.

Flock's ``{'prompt': ..., 'context_columns': [{'data': col, 'name': ...}]}`` (and Flock 0.2's
columns object ``{'name': col}``) reach :func:`flock_udf` as JSON and become the template
``Prompt.with_context`` writes on ``connect()``: the same code, so the same words (a macro
building it in SQL cost DuckDB ~70 ms to bind per function).


``AI.IF(('Is this spam? ', body))`` means the template ``'Is this spam? {0}'`` with ``body`` as
its value: the text parts are the template, the others its values. A DuckDB macro receives the
tuple's values only, so it cannot tell the text ``'Is this spam? '`` from a column holding those
words; the template decides what the model is asked (its words name a scale or a list of
answers, see ``llm/prompts.py``), so guessing would change answers. The macro passes the
statement's own text (``current_query()``) with the parts; :func:`split_parts` finds the call's
tuple in it (the same parse as ``connect()``'s rewrite, :func:`~.peers.find_peer_calls`) and
splits each row as ``Prompt.concat`` (:mod:`.peer_args`) does. A row no tuple of the statement
matches (a relation built in Python, whose SQL DuckDB regenerates) takes every part as a
value: the same words reach the model, in a template that names no scale.

Example:
    ``split_parts("SELECT AI.IF(('Q: ', t)) FROM x", "ai.if", ["Q: ", "hi"])`` is
    ``('Q: {0}', ('hi',))``
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence

import pyarrow as pa
from sqlglot import exp

from duckdb_sem.surface.peer_args import Prompt, string_of
from duckdb_sem.surface.peers import find_peer_calls

__all__ = ["PROMPT_TYPE", "flock_prompt", "flock_udf", "parts_udf", "split_parts", "tuple_shapes"]

#: the prompt every install(con) peer macro passes on: a positional template, its values and
#: how many there are (what ``PROMPT(...)`` makes, and :func:`split_parts` answers)
PROMPT_TYPE = "STRUCT(template VARCHAR, args VARCHAR[], given INTEGER)"

#: a tuple's shape: per part, its text when the part is a string literal, else None
Shape = tuple[str | None, ...]


@functools.lru_cache(maxsize=64)
def tuple_shapes(sql: str, peer: str) -> tuple[Shape, ...]:
    """The shape of every tuple prompt that a call of ``peer`` (``ai.if``; its ``ai_if``
    spelling too) has in ``sql``, in the order written."""
    names = {peer, peer.replace(".", "_")}
    shapes: list[Shape] = []
    for name, call in find_peer_calls(sql):
        node = call.get("prompt", 0)
        if name in names and isinstance(node, exp.Tuple):
            shapes.append(tuple(string_of(part) for part in node.expressions))
    return tuple(shapes)


def split_parts(
    sql: str, peer: str, parts: Sequence[str | None]
) -> tuple[str, tuple[str | None, ...]]:
    """One row's tuple ``parts`` as a template and its values (see the module docstring)."""
    shape = next((s for s in tuple_shapes(sql, peer) if _fits(s, parts)), (None,) * len(parts))
    template: list[str] = []
    values: list[str | None] = []
    for text, part in zip(shape, parts, strict=True):
        if text is not None:
            template.append(text.replace("{", "{{").replace("}", "}}"))
        else:
            template.append(f"{{{len(values)}}}")
            values.append(part)
    if not values:  # all text: the prompt is its own value, as connect() writes it
        return "{0}", ("".join(t for t in shape if t is not None),)
    return "".join(template), tuple(values)


def _fits(shape: Shape, parts: Sequence[str | None]) -> bool:
    return len(shape) == len(parts) and all(
        text is None or text == part for text, part in zip(shape, parts, strict=True)
    )


def parts_udf(array: pa.Array, peer: pa.Array, parts: pa.Array) -> pa.Array:
    """The Arrow UDF behind the macros' tuple prompts: (statement, peer, parts) per row to
    :data:`PROMPT_TYPE` (template, values, how many)."""
    rows: list[dict[str, object] | None] = []
    for sql, name, row in zip(array.to_pylist(), peer.to_pylist(), parts.to_pylist(), strict=True):
        if row is None:
            rows.append(None)
            continue
        template, values = split_parts(str(sql or ""), str(name), row)
        rows.append({"template": template, "args": list(values), "given": len(values)})
    return pa.array(rows, type=_ARROW_PROMPT)


_ARROW_PROMPT = pa.struct(
    [("template", pa.string()), ("args", pa.list_(pa.string())), ("given", pa.int32())]
)


def flock_prompt(spec: object, columns: object = None) -> tuple[str, tuple[str | None, ...]]:
    """Flock's prompt object ``spec`` (and its 0.2 columns object) as template and values."""
    fields = spec if isinstance(spec, dict) else {}
    context: list[tuple[str | None, str | None]] = []
    for item in fields.get("context_columns") or []:
        entry = item if isinstance(item, dict) else {}
        context.append((entry.get("name"), _text(entry.get("data"))))
    for name, value in (columns if isinstance(columns, dict) else {}).items():
        context.append((str(name), _text(value)))
    text = str(fields.get("prompt") or "")
    if not context:  # the prompt is its own value, as connect() writes it
        return "{0}", (text,)
    template = Prompt.with_context(text, [(name, "") for name, _ in context]).template
    return template, tuple(value for _, value in context)


def flock_udf(spec: pa.Array, columns: pa.Array) -> pa.Array:
    """The Arrow UDF behind Flock's macros: (prompt object, columns object) as JSON text per row
    to :data:`PROMPT_TYPE`."""
    rows: list[dict[str, object] | None] = []
    for one, more in zip(spec.to_pylist(), columns.to_pylist(), strict=True):
        if one is None:
            rows.append(None)
            continue
        template, values = flock_prompt(json.loads(one), None if more is None else json.loads(more))
        rows.append({"template": template, "args": list(values), "given": len(values)})
    return pa.array(rows, type=_ARROW_PROMPT)


def _text(value: object) -> str | None:
    """A JSON value as DuckDB's ``::VARCHAR`` writes it (text as is, numbers as written)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
