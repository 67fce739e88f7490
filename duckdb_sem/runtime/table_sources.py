"""Lazy Arrow streams behind the semantic table functions, and the work they do per batch.

A :class:`LazyArrowSource` is what gets registered in DuckDB: it implements the Arrow PyCapsule
stream interface, so DuckDB asks it for a fresh stream at every scan. Nothing runs until DuckDB
pulls the first batch (a ``LIMIT 0`` describe costs nothing); batches are produced one at a time
as DuckDB asks for them, and kept, so a second scan of the same statement (a self-join, a CTE
used twice) replays them instead of asking the model again.

Ranking in ``sem_topk`` is by *score*: one yes/no decision per row ("does this row satisfy the
instruction?") whose ``Completion.score`` (the backend's yes-minus-no margin) orders the rows.
That is n calls, each independent (cached, deduplicated and fused like any ``sem_filter``
decision), against about n·log2(n) dependent calls for pairwise comparisons. See
``docs/table_functions.md`` for the trade-off; ``method := 'pairwise'`` and ``'listwise'``
(:mod:`.ranking`) rank by comparisons instead.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, Sequence

import pyarrow as pa

from duckdb_sem.errors import SemError
from duckdb_sem.llm.call_options import DEFAULT_OPTIONS, CallOptions
from duckdb_sem.llm.outputs import TypeSpec
from duckdb_sem.llm.request import Completion, OperatorKind
from duckdb_sem.llm.template import parse_template
from duckdb_sem.runtime.context import QueryContext
from duckdb_sem.runtime.operators import SemEngine
from duckdb_sem.runtime.ranking import rank_rows

__all__ = [
    "LazyArrowSource",
    "extract_batches",
    "extract_schema",
    "topk_batches",
    "topk_schema",
    "unique_names",
]

Producer = Callable[[], Iterator[pa.RecordBatch]]


class LazyArrowSource:
    """A re-scannable Arrow stream computed on first pull; register it with ``con.register``.

    ``on_error`` sees a duckdb-sem error raised while producing (DuckDB wraps it in its own), so
    the connection can re-raise the original.
    """

    def __init__(
        self,
        schema: pa.Schema,
        produce: Producer,
        *,
        on_error: Callable[[SemError], None] | None = None,
    ) -> None:
        self.schema = schema
        self._produce = produce
        self._on_error = on_error
        self._lock = threading.Lock()
        self._cache: list[pa.RecordBatch] = []
        self._source: Iterator[pa.RecordBatch] | None = None
        self._done = False

    def __arrow_c_schema__(self) -> object:
        return self.schema.__arrow_c_schema__()

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        reader = pa.RecordBatchReader.from_batches(self.schema, self._replay())
        return reader.__arrow_c_stream__(requested_schema)

    def _replay(self) -> Iterator[pa.RecordBatch]:
        i = 0
        while True:
            with self._lock:
                if i < len(self._cache):
                    batch = self._cache[i]
                elif self._done:
                    return
                else:
                    batch = self._next()
                    if batch is None:
                        return
            i += 1
            yield batch

    def _next(self) -> pa.RecordBatch | None:
        if self._source is None:
            self._source = self._produce()
        try:
            batch = next(self._source)
        except StopIteration:
            self._done = True
            return None
        except SemError as err:
            if self._on_error is not None:
                self._on_error(err)
            raise
        batch = batch.cast(self.schema) if batch.schema != self.schema else batch
        self._cache.append(batch)
        return batch


def unique_names(names: Sequence[str]) -> list[str]:
    """Column names made unique as DuckDB does in subqueries: ``id``, ``id_1``, ``id_2``."""
    seen: set[str] = set()
    out = []
    for name in names:
        candidate, n = name, 0
        while candidate.lower() in seen:
            n += 1
            candidate = f"{name}_{n}"
        seen.add(candidate.lower())
        out.append(candidate)
    return out


def extract_schema(source: pa.Schema, struct: TypeSpec) -> pa.Schema:
    names = unique_names([*source.names, *(name for name, _ in struct.children)])
    added = zip(names[len(source) :], struct.children, strict=True)
    fields = [*source, *(pa.field(n, c.arrow) for n, (_, c) in added)]
    return pa.schema(fields)


def extract_batches(
    table: pa.Table,
    template: str,
    columns: Sequence[str],
    struct: TypeSpec,
    *,
    engine: SemEngine,
    query: Callable[[], QueryContext],
    batch_size: int,
    options: CallOptions = DEFAULT_OPTIONS,
) -> Iterator[pa.RecordBatch]:
    """``sem_extract``: each input batch plus one column per struct field (NULL if unparsed)."""
    schema = extract_schema(table.schema, struct)
    for batch in table.to_batches(max_chunksize=batch_size):
        if not batch.num_rows:
            continue
        args = [batch.column(batch.schema.get_field_index(c)) for c in columns]
        values = engine.run_operator(
            OperatorKind.MAP, template, args, output_type=struct.sql, query=query(),
            label="sem_extract", options=options,
        )  # fmt: skip
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        fields = values.flatten() if len(struct.children) else []
        yield pa.RecordBatch.from_arrays([*batch.columns, *fields], schema=schema)


def topk_schema(source: pa.Schema) -> pa.Schema:
    rank, score = unique_names([*source.names, "sem_rank", "sem_score"])[-2:]
    return source.append(pa.field(rank, pa.int64())).append(pa.field(score, pa.float64()))


def topk_batches(
    table: pa.Table,
    template: str,
    columns: Sequence[str],
    k: int,
    *,
    engine: SemEngine,
    query: Callable[[], QueryContext],
    options: CallOptions = DEFAULT_OPTIONS,
) -> Iterator[pa.RecordBatch]:
    """``sem_topk``: the ``k`` rows with the highest decision score, best first.

    Ties keep the input order; rows with a NULL input get no call and rank last. With
    ``method := 'pairwise'`` or ``'listwise'`` (:mod:`.ranking`) the order is the comparisons'
    and ``sem_score`` is NULL: such a ranking gives places, not scores.
    """
    if options.method not in (None, "pointwise"):
        order = rank_rows(table, template, columns, k, method=options.method, engine=engine,
                          query=query(), options=options)  # fmt: skip
        yield from _ranked(table, order, [None] * len(order))
        return
    args = [table.column(c).combine_chunks() for c in columns]
    answers = engine.completions(OperatorKind.FILTER, parse_template(template), args,
                                 query=query(), label="sem_topk", options=options)  # fmt: skip
    scores = [_score(a) for a in answers]
    order = sorted(range(len(scores)), key=lambda i: -scores[i])[:k]
    yield from _ranked(table, order, [None if math.isinf(scores[i]) else scores[i] for i in order])


def _ranked(
    table: pa.Table, order: list[int], scores: list[float | None]
) -> Iterator[pa.RecordBatch]:
    top = table.take(pa.array(order, type=pa.int64()))
    ranks = pa.array(range(1, len(order) + 1), type=pa.int64())
    score_col = pa.array(scores, type=pa.float64())
    out = pa.Table.from_arrays([*top.columns, ranks, score_col], schema=topk_schema(table.schema))
    yield from out.to_batches()


def _score(answer: Completion | None) -> float:
    if answer is None or answer.value is None:
        return -math.inf
    if answer.score is not None:
        return float(answer.score)
    return 1.0 if answer.value else -1.0
