"""``sem_sim_join`` and ``sem_search``: exact top-k by embedding similarity, computed in DuckDB.

Both embed their text columns (``runtime.embeddings``: batched, cached, counted apart from
LLM calls), register the vectors as ``FLOAT[d]`` arrays and let DuckDB rank the pairs by
``array_cosine_similarity``: for every left row (the query text, for ``sem_search``) the ``k``
right rows of highest similarity, ties broken by input order. Exact, no index: the work is one
vectorized similarity per pair. A NULL text matches nothing (as in an inner join). No LLM call.

Output: the inputs' columns (made unique as DuckDB does: ``id``, ``id_1``) and then
``sem_rank`` (1 = most similar, per left row) and ``sem_similarity`` (the cosine, in [-1, 1]).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from duckdb_sem.llm.render import render_column
from duckdb_sem.runtime.embeddings import Embeddings
from duckdb_sem.runtime.table_sources import unique_names

__all__ = ["search_batches", "search_schema", "sim_join_batches", "sim_join_schema", "top_k"]

_serial = itertools.count(1)


def sim_join_schema(left: pa.Schema, right: pa.Schema) -> pa.Schema:
    fields = [*left, *right]
    names = unique_names([*left.names, *right.names, "sem_rank", "sem_similarity"])
    out = [f.with_name(n) for f, n in zip(fields, names, strict=False)]
    out += [pa.field(names[-2], pa.int64()), pa.field(names[-1], pa.float64())]
    return pa.schema(out)


def search_schema(source: pa.Schema) -> pa.Schema:
    names = unique_names([*source.names, "sem_rank", "sem_similarity"])
    return source.append(pa.field(names[-2], pa.int64())).append(pa.field(names[-1], pa.float64()))


def _vectors(rows: np.ndarray, ids: np.ndarray) -> pa.Table:
    dims = rows.shape[1]
    flat = pa.array(rows.astype(np.float32).ravel(), type=pa.float32())
    return pa.table({"i": pa.array(ids, type=pa.int64()),
                     "e": pa.FixedSizeListArray.from_arrays(flat, dims)})  # fmt: skip


def top_k(
    con: Any, left: np.ndarray, right: np.ndarray, k: int, *,
    left_ok: np.ndarray | None = None, right_ok: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """(left index, right index, similarity) of each left row's ``k`` most similar right rows,
    by DuckDB's ``array_cosine_similarity`` (exact); ordered by left row, then rank."""
    lok = np.ones(len(left), bool) if left_ok is None else left_ok
    rok = np.ones(len(right), bool) if right_ok is None else right_ok
    lids, rids = np.flatnonzero(lok), np.flatnonzero(rok)
    if not len(lids) or not len(rids):
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0)
    n = next(_serial)
    names = (f"__sem_sim_l{n}", f"__sem_sim_r{n}")
    con.register(names[0], _vectors(left[lids], lids))
    con.register(names[1], _vectors(right[rids], rids))
    try:
        rows = con.sql(
            f"SELECT l.i AS li, r.i AS ri, array_cosine_similarity(l.e, r.e) AS s "
            f"FROM {names[0]} AS l CROSS JOIN {names[1]} AS r "
            f"QUALIFY row_number() OVER (PARTITION BY l.i ORDER BY s DESC, r.i) <= {int(k)} "
            f"ORDER BY li, s DESC, ri"
        ).to_arrow_table()
    finally:
        for name in names:
            con.unregister(name)
    return (rows.column("li").to_numpy(), rows.column("ri").to_numpy(),
            rows.column("s").to_numpy().astype(np.float64))  # fmt: skip


def _embed(table: pa.Table, column: str, embeddings: Embeddings,
           query: Any) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    texts = render_column(table.column(column))
    ok = np.array([t is not None for t in texts], dtype=bool)
    return embeddings.embed(texts, query=query), ok


def _ranks(li: np.ndarray) -> np.ndarray:
    ranks = np.ones(len(li), dtype=np.int64)
    for i in range(1, len(li)):
        if li[i] == li[i - 1]:
            ranks[i] = ranks[i - 1] + 1
    return ranks


def sim_join_batches(
    con: Any, left: pa.Table, right: pa.Table, columns: tuple[str, str], k: int, *,
    embeddings: Embeddings, query: Any,
) -> Iterator[pa.RecordBatch]:  # fmt: skip
    """``sem_sim_join``: each left row with its ``k`` most similar right rows."""
    lv, lok = _embed(left, columns[0], embeddings, query)
    rv, rok = _embed(right, columns[1], embeddings, query)
    li, ri, sims = top_k(con, lv, rv, k, left_ok=lok, right_ok=rok)
    arrays = [*left.take(pa.array(li)).columns, *right.take(pa.array(ri)).columns,
              pa.array(_ranks(li)), pa.array(sims, type=pa.float64())]  # fmt: skip
    schema = sim_join_schema(left.schema, right.schema)
    yield from pa.Table.from_arrays(arrays, schema=schema).to_batches()


def search_batches(
    con: Any, table: pa.Table, column: str, text: str, k: int, *,
    embeddings: Embeddings, query: Any,
) -> Iterator[pa.RecordBatch]:  # fmt: skip
    """``sem_search``: the ``k`` rows whose ``column`` is most similar to ``text``."""
    qv = embeddings.embed([text], query=query)
    rv, rok = _embed(table, column, embeddings, query)
    _, ri, sims = top_k(con, qv, rv, k, right_ok=rok)
    arrays = [*table.take(pa.array(ri)).columns, pa.array(np.arange(1, len(ri) + 1)),
              pa.array(sims, type=pa.float64())]  # fmt: skip
    yield from pa.Table.from_arrays(arrays, schema=search_schema(table.schema)).to_batches()
