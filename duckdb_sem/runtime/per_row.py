"""Run a ``sem_join`` with ``per_row :=``: one decision per distinct row value, then compare.

The rewrite itself (checks, which answers match) is :mod:`duckdb_sem.llm.pairs`; this asks the
per-row question through the engine's one request path (memo, cache, SEUs, the call's
``model :=``), so a self-join asks each review once and a join of N by M rows at most N + M
times, whichever road (planned or UDF) hands the engine the pairs.

Example: pairs (a, b), (a, c), (b, c) ask the question of a, b and c, three calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import pyarrow as pa

from duckdb_sem.llm.call_options import CallOptions
from duckdb_sem.llm.pairs import compare, per_row_plan
from duckdb_sem.llm.render import render_column
from duckdb_sem.llm.request import OperatorKind

__all__ = ["answer_per_row"]


class _Engine(Protocol):
    def run_operator(self, kind: OperatorKind, template: str, args: Sequence[pa.Array], *,
                     query: Any, label: str = "", options: CallOptions) -> pa.Array: ...  # fmt: skip


def answer_per_row(engine: _Engine, template: str, args: Sequence[pa.Array], *, query: Any,
                   label: str, options: CallOptions) -> pa.Array:  # fmt: skip
    """The pair answers of ``template`` over ``args`` (two columns) by the rewrite in
    ``options`` (``per_row`` set)."""
    assert options.per_row is not None
    plan = per_row_plan(template, options.per_row, options.per_row_match)
    left, right = (render_column(a) for a in args[:2])
    distinct = list(dict.fromkeys(v for v in (*left, *right) if v is not None))
    asked = engine.run_operator(OperatorKind.FILTER, plan.question, [pa.array(distinct, pa.string())],
                                query=query, label=f"{label} per_row",
                                options=options.without_rewrite())  # fmt: skip
    answer = dict(zip(distinct, asked.to_pylist(), strict=True))
    got = compare([None if v is None else answer[v] for v in left],
                  [None if v is None else answer[v] for v in right], plan.match)  # fmt: skip
    return pa.array(got, type=pa.bool_())
