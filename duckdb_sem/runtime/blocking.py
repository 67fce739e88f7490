"""Blocking a ``sem_join`` by embedding similarity: learn the threshold, then produce the pairs.

An approximate plan (only when the query allows it: ``runtime.approximation``) replaces the
nested loop of a ``SemJoin`` whose inputs are relational by *blocking*:

1. :func:`block_sem_joins` (when the query is prepared, so EXPLAIN SEMANTIC shows the result):
   embed each side's text (the rendered fields the template reads from that side, one text per
   row; ``runtime.embeddings``), compute every pair's cosine similarity, let the LLM label a
   stratified sample of pairs (``estimator.recall.sample_pairs``; its answers are cached, so
   the run asks none of them again), and learn the highest threshold whose stratified lower
   confidence bound of recall reaches the target at ``confidence`` (``bounded_threshold``).
   The SemJoin gets a
   :class:`~duckdb_sem.plan.blocking.Blocking`; joins with fewer than ``min_pairs`` pairs, whose
   sample holds no match, or whose bound reaches the target only by keeping every pair, stay
   nested loops (lossless).
2. :func:`blocked_pairs` (each SEU): the pairs of the current inputs whose similarity reaches
   the threshold, then the relational condition; the executor sends only those to the LLM.

Example: 500 reviews x 100 plots is 50,000 pairs; a threshold keeping 2% of them sends about
1,000 pairs (plus the 100 labelled) to the LLM instead of 50,000.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from duckdb_sem.errors import ConfigError
from duckdb_sem.estimator.recall import bounded_threshold, sample_pairs
from duckdb_sem.llm.render import render_column
from duckdb_sem.plan.blocking import Blocking
from duckdb_sem.plan.nodes import Node, SemJoin, quote
from duckdb_sem.runtime.approximation import Approximation, decline
from duckdb_sem.runtime.embeddings import Embeddings

__all__ = ["block_sem_joins", "blocked_pairs", "embeddings_of", "similarities"]

log = logging.getLogger(__name__)

_CHUNK = 2048  # left rows per similarity block: memory stays ~chunk x right rows floats


def embeddings_of(engine: Any) -> Embeddings:
    """The embedding model behind an evaluator (the engine, or a wrapper of it)."""
    found = getattr(engine, "embeddings", None)
    if not isinstance(found, Embeddings):
        raise ConfigError(
            "this connection has no embedding model; open it with duckdb_sem.connect() "
            "(DUCKDB_SEM_EMBED_BACKEND chooses the model)"
        )
    return found


def side_texts(table: pa.Table, args: Sequence[str]) -> list[str | None]:
    """One text per row: the rendered ``args`` columns, one per line (None if one is NULL)."""
    columns = [render_column(table.column(a)) for a in dict.fromkeys(args)]
    return [None if any(v is None for v in row) else "\n".join(row)
            for row in zip(*columns, strict=True)]  # fmt: skip


def similarities(left: np.ndarray, right: np.ndarray, left_ok: np.ndarray,
                 right_ok: np.ndarray) -> np.ndarray:  # fmt: skip
    """Cosine similarity of every pair of unit rows; NaN where a side's text is NULL."""
    sims = np.empty((len(left), len(right)), dtype=np.float32)
    for start in range(0, len(left), _CHUNK):
        sims[start : start + _CHUNK] = left[start : start + _CHUNK] @ right.T
    sims[~left_ok, :] = np.nan
    sims[:, ~right_ok] = np.nan
    return sims


def _side_vectors(table: pa.Table, node: SemJoin, side: Node, embeddings: Embeddings,
                  query: Any) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    texts = side_texts(table, [a for a in node.call.args if a in side.attrs])
    ok = np.array([t is not None for t in texts], dtype=bool)
    return embeddings.embed(texts, query=query), ok


def _pair_sims(con: Any, node: SemJoin, left_sql: str, right_sql: str, embeddings: Embeddings,
               query: Any) -> tuple[pa.Table, pa.Table, np.ndarray]:  # fmt: skip
    left = con.sql(left_sql).to_arrow_table()
    right = con.sql(right_sql).to_arrow_table()
    lv, lok = _side_vectors(left, node, node.left, embeddings, query)
    rv, rok = _side_vectors(right, node, node.right, embeddings, query)
    return left, right, similarities(lv, rv, lok, rok)


def learn_blocking(
    con: Any,
    node: SemJoin,
    sides: tuple[str, str],
    engine: Any,
    query: Any,
    approximation: Approximation,
) -> Blocking | None:
    """The blocking of ``node`` for this query, or None where a nested loop is the plan."""
    embeddings = embeddings_of(engine)
    left, right, sims = _pair_sims(con, node, *sides, embeddings, query)
    pairs = left.num_rows * right.num_rows
    if pairs < approximation.min_pairs:
        decline(query, node.label(), f"{pairs:,} pairs, under the {approximation.min_pairs:,} "
                "that make a labelled sample worth it: nested loop")  # fmt: skip
        return None
    # Matches are rare, and a recall estimated from a handful of them is mostly luck: the
    # threshold is learned against a stratified lower confidence bound (estimator.recall), and
    # the sample doubles until that bound reaches the target at some threshold short of "keep
    # every pair", or reaches ``max_sample`` pairs. Each look at a sample spends a share of the
    # confidence (Bonferroni over the looks the doubling may take). Pairs labelled in a smaller
    # sample come from the query's memo (and the cache), not from the LLM again.
    size = approximation.join_sample
    cap = max(size, min(approximation.max_sample, pairs // 4))
    looks = 1 + max(0, math.ceil(math.log2(cap / size)))
    delta = (1.0 - approximation.confidence) / looks
    while True:
        sample = sample_pairs(sims, size)
        at = np.array(sample.indices, dtype=np.int64)
        labels = _label(node, left, right, at, engine, query)
        learned = bounded_threshold(sample, labels, approximation.join_recall, delta)
        useful = learned.threshold is not None and learned.kept_strata != len(sample.sizes)
        if useful or size >= cap:
            break
        size = min(2 * size, cap)
    if learned.threshold is None:
        decline(query, node.label(), f"no match among {len(at):,} sampled pairs: nested loop")
        return None
    if not useful:
        decline(query, node.label(), f"{len(at):,} labelled pairs cannot bound recall "
                f"{approximation.join_recall:.2f} at confidence {approximation.confidence:.2f} "
                "short of every pair: nested loop")  # fmt: skip
        return None
    with np.errstate(invalid="ignore"):
        candidates = int(np.count_nonzero(sims >= np.float32(learned.threshold)))
    return Blocking(
        threshold=learned.threshold, recall_target=approximation.join_recall,
        sample_recall=learned.sample_recall, sample_pairs=len(at),
        recall_bound=float(learned.recall_bound or 0.0), confidence=approximation.confidence,
        sample_positives=learned.positives, candidates=candidates, pairs=pairs,
        embedder=embeddings.client.backend_id,
    )  # fmt: skip


def _label(node: SemJoin, left: pa.Table, right: pa.Table, at: np.ndarray, engine: Any,
           query: Any) -> list[bool | None]:  # fmt: skip
    """The LLM's answers for the pairs at flat indices ``at`` (a JOIN call, as the loop asks)."""
    li, ri = np.divmod(at, right.num_rows)
    args = [
        (left.column(a).take(pa.array(li)) if a in node.left.attrs
         else right.column(a).take(pa.array(ri)))
        for a in node.call.args
    ]  # fmt: skip
    mask = engine.run_operator(node.call.kind, node.call.template, args,
                               output_type=node.call.output_type, query=query,
                               label="sem_join blocking sample",
                               options=node.call.options)  # fmt: skip
    labels: list[bool | None] = mask.to_pylist()
    return labels


def block_sem_joins(
    con: Any, plan: Node, engine: Any, query: Any, approximation: Approximation
) -> Node:
    """``plan`` with each SemJoin over relational inputs blocked where it pays (see module)."""
    # imported here: execute_plan imports this module to run the blocked pairs
    from duckdb_sem.runtime.execute_plan import relational_sql

    def blocked(node: Node) -> Node:
        if (
            isinstance(node, SemJoin)
            and node.blocking is None
            and node.call.options.per_row is None  # it asks rows already, not pairs
            and not any(n.semantic for c in node.children for n in c.walk())
        ):
            sides = (relational_sql(con, node.left), relational_sql(con, node.right))
            blocking = learn_blocking(con, node, sides, engine, query, approximation)
            if blocking is not None:
                node = dataclasses.replace(node, blocking=blocking)
        return node

    return plan.transform(blocked)


def blocked_pairs(
    con: Any, node: SemJoin, left_sql: str, right_sql: str, engine: Any, query: Any
) -> pa.Table:
    """The pairs of ``left_sql`` x ``right_sql`` at or above the node's threshold that meet
    its relational condition: left columns, then right columns, as the nested loop has them."""
    assert node.blocking is not None
    left, right, sims = _pair_sims(con, node, left_sql, right_sql, embeddings_of(engine), query)
    with np.errstate(invalid="ignore"):
        li, ri = np.nonzero(sims >= np.float32(node.blocking.threshold))
    left_part = left.take(pa.array(li, type=pa.int64()))
    right_part = right.take(pa.array(ri, type=pa.int64()))
    table = pa.Table.from_arrays(
        [*left_part.columns, *right_part.columns],
        names=[*left.schema.names, *right.schema.names],
    )
    if node.condition is None:
        return table
    name = f"__sem_blocked_{id(table):x}"
    con.register(name, table)
    try:
        kept: pa.Table = con.sql(
            f"SELECT * FROM {quote(name)} WHERE {node.condition.sql}"
        ).to_arrow_table()
    finally:
        con.unregister(name)
    return kept
