"""The similarity table functions' arguments: ``sem_sim_join`` and ``sem_search`` in FROM.

======================================================================  =========================
function                                                                rows
======================================================================  =========================
``sem_sim_join('left', 'right', 'left_col', 'right_col', k)``           each left row with its k
                                                                        most similar right rows
``sem_search('input', 'col', 'query text', k)``                         the k rows most similar
                                                                        to the query text
======================================================================  =========================

Inputs are table or view names or queries, as for the other table functions; columns are named
by string literals and must be text (checked when the inputs are read, before any embedding);
``k`` is a positive integer literal. Both add ``sem_rank`` and ``sem_similarity`` columns and
make no LLM call: they rank by the embedding model's cosine similarity (``runtime.similarity``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from duckdb_sem.errors import BindError, UnknownColumnError

__all__ = ["SIMILARITY_FUNCTIONS", "SimilarityCall", "check_text_column", "parse_similarity_call"]

SIMILARITY_FUNCTIONS = ("sem_sim_join", "sem_search")
_USAGE = {
    "sem_sim_join": "sem_sim_join('left_table_or_query', 'right_table_or_query', "
    "'left_column', 'right_column', k)",
    "sem_search": "sem_search('table_or_query', 'column', 'query text', k)",
}


@dataclass(frozen=True, slots=True)
class SimilarityCall:
    """One validated ``sem_sim_join`` / ``sem_search`` call."""

    name: str
    inputs: tuple[str, ...]  # a query per input
    columns: tuple[str, ...]  # the text column of each input
    k: int
    text: str | None = None  # sem_search's query text

    def __post_init__(self) -> None:
        if self.k < 1:
            raise BindError(f"{self.name}: k must be at least 1, got {self.k}")


ReadInput = Callable[[exp.Expression, str, str], tuple[str, str | None]]
ReadString = Callable[[exp.Expression, str, str, str], str]


def parse_similarity_call(
    node: exp.Anonymous, read_input: ReadInput, text: ReadString
) -> SimilarityCall:
    """Validate one call; ``read_input(node, name, usage)`` turns an input argument into a
    query, ``as_string(node, name, what, usage)`` reads a string literal."""
    name = node.name.lower()
    args = list(node.expressions)
    usage = _USAGE[name]
    want = 5 if name == "sem_sim_join" else 4
    if len(args) != want:
        raise BindError(f"{name} takes {want} arguments in FROM ({len(args)} given): {usage}")
    k = _k(args[-1], name, usage)
    if name == "sem_sim_join":
        left = read_input(args[0], name, usage)[0]
        right = read_input(args[1], name, usage)[0]
        cols = tuple(text(a, name, "a column name", usage) for a in args[2:4])
        return SimilarityCall(name, (left, right), cols, k)
    source = read_input(args[0], name, usage)[0]
    column = text(args[1], name, "a column name", usage)
    query_text = text(args[2], name, "the query text", usage)
    if not query_text.strip():
        raise BindError(f"{name}: the query text is empty: {usage}")
    return SimilarityCall(name, (source,), (column,), k, query_text)


def check_text_column(call: SimilarityCall, schema: pa.Schema, column: str) -> None:
    """Raise unless ``column`` is a text column of ``schema`` (named as the user wrote it)."""
    if column not in schema.names:
        near = [n for n in schema.names if n.lower() == column.lower()]
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise UnknownColumnError(
            f"{call.name}: unknown column {column!r}{hint}; available: {', '.join(schema.names)}"
        )
    kind = schema.field(column).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise BindError(
            f"{call.name}: column {column!r} is {kind}, not text; embed a text column, or cast "
            f"it in a query input, e.g. 'SELECT *, {column}::VARCHAR AS {column}_text FROM t'"
        )


def _k(node: exp.Expression, name: str, usage: str) -> int:
    text = node.sql(dialect="duckdb")
    value = text.lstrip("-")
    if isinstance(node, exp.Literal | exp.Neg) and value.isdigit():
        k = -int(value) if text.startswith("-") else int(value)
        if k >= 1:
            return k
        raise BindError(f"{name}: k must be at least 1, got {k}: {usage}")
    raise BindError(f"{name}: k must be a positive integer literal, got {text}: {usage}")
