"""BigQuery's tuple prompts on ``install(con)``: which parts were text, read from the statement.

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
from collections.abc import Sequence

import pyarrow as pa
from sqlglot import exp

from duckdb_sem.surface.peer_args import string_of
from duckdb_sem.surface.peers import find_peer_calls

__all__ = ["PROMPT_TYPE", "parts_udf", "split_parts", "tuple_shapes"]

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
