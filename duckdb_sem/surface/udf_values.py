"""What a ``sem_*`` UDF reads from its Arrow arguments: the columns of each row's value list,
and the column count and named arguments its macro passed (checked into a ``CallOptions``)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc

from duckdb_sem.errors import BindError
from duckdb_sem.llm.call_options import CallOptions, choices_option, examples_option

__all__ = ["call_options", "combined", "row_columns"]


def combined(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array


def row_columns(values: pa.Array, count: int | None) -> list[pa.Array]:
    """Element ``i`` of every row's list, one string array per column given (``count``; None:
    as many as the longest list), taken by Arrow when every list is that long."""
    lengths = pc.fill_null(pc.list_value_length(values), 0)
    width = int(pc.max(lengths).as_py() or 0) if count is None else count
    if not len(values) or pc.min(lengths).as_py() >= width:
        return [pc.list_element(values, i).cast(pa.string()) for i in range(width)]
    rows = values.to_pylist()  # ragged or NULL lists (not from the macros): row by row
    return [
        pa.array([None if r is None or i >= len(r) else r[i] for r in rows], type=pa.string())
        for i in range(width)
    ]


def call_options(name: str, key: tuple[object, ...]) -> tuple[int | None, CallOptions]:
    """A UDF row's column count and named arguments (as its macro passed them), checked."""
    count, model, temperature, max_tokens, choices, per_row, match, examples, batch = (
        *key[1:], *[None] * 9)[:9]  # fmt: skip
    if model is not None and not isinstance(model, str):
        raise BindError(f"{name}: model := takes a model name, e.g. model := 'fast'")
    options = CallOptions(
        model=model,
        temperature=None if temperature is None else float(temperature),  # type: ignore[arg-type]
        max_tokens=None if max_tokens is None else int(max_tokens),  # type: ignore[call-overload]
        # the macro passes the list as to_json text
        choices=choices_option(name, None if choices is None else json.loads(str(choices))),
        per_row=None if per_row is None else str(per_row),
        per_row_match=None if match is None else str(match),
        examples=examples_option(name, None if examples is None else json.loads(str(examples))),
        batch_size=None if batch is None else int(batch),  # type: ignore[call-overload]
    )
    options.check_for(name)
    return (None if count is None else int(count)), options  # type: ignore[call-overload]
