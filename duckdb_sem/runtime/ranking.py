"""``sem_topk``'s ranking methods: which rows come first, and how many calls that may take.

=============  ==================================================  ==============================
method         asks                                                calls for the top k of n rows
=============  ==================================================  ==============================
``pointwise``  one scored yes/no decision per row (the default)    ``n``
``pairwise``   "does A fit better than B?" in a knockout           at most ``n - 1 + (k - 1) ·
               tournament (:mod:`.tournament`)                     ⌈log2 n⌉``
``listwise``   windows of ``w`` rows ranked in one generated       exactly the windows of
               answer, sliding (:mod:`.sliding_window`)            ``⌈k / (w - s)⌉`` passes
=============  ==================================================  ==============================

Every comparison and window is a request built by :mod:`duckdb_sem.llm.rank_prompts` and
asked through :meth:`SemEngine.completions`, the one render-and-ask path: memo, SEUs, the
scheduler, the persistent cache, the budget. An answer that cannot be read (a pair decision
without a value, a window that is not a whole permutation) keeps a fallback order and adds
one to ``rank_fallbacks``. Rows with a NULL input are not compared; they rank last.

Example:
    >>> call_bound("pairwise", 30, 10)
    74
    >>> call_bound("listwise", 30, 10)
    18
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from duckdb_sem.llm.call_options import DEFAULT_OPTIONS, RANK_METHODS, CallOptions
from duckdb_sem.llm.rank_prompts import pair_template, parse_permutation, window_template
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.llm.template import Template
from duckdb_sem.runtime.context import QueryContext
from duckdb_sem.runtime.operators import SemEngine
from duckdb_sem.runtime.sliding_window import sliding_topk, window_bound
from duckdb_sem.runtime.tournament import tournament_bound, tournament_topk

__all__ = ["LISTWISE_STEP", "LISTWISE_WINDOW", "call_bound", "explain_line", "rank_rows"]

#: rows per listwise window, and how far it slides: 8 rows of a few hundred characters fit a
#: 2,048-token context with the answer; a pass settles ``8 - 4 = 4`` places
LISTWISE_WINDOW = 8
LISTWISE_STEP = 4

_HOW = {
    "pointwise": "one scored yes/no decision per row",
    "pairwise": "knockout tournament of pairwise comparisons",
    "listwise": f"sliding windows of {LISTWISE_WINDOW} rows (step {LISTWISE_STEP}), "
    "each ranked in one answer",
}
_FORMULA = {
    "pointwise": "n",
    "pairwise": "n - 1 + (k - 1)·⌈log2 n⌉",
    "listwise": f"⌈k/{LISTWISE_WINDOW - LISTWISE_STEP}⌉ passes of 1 + ⌈(m - {LISTWISE_WINDOW})/"
    f"{LISTWISE_STEP}⌉ windows (m: the rows from the pass's start)",
}


def _method(method: str | None) -> str:
    name = method or RANK_METHODS[0]
    if name not in RANK_METHODS:
        raise ValueError(f"unknown ranking method {method!r}")
    return name


def call_bound(method: str | None, n: int, k: int) -> int:
    """The most LLM calls ``method`` makes for the top ``k`` of ``n`` rows with inputs."""
    name = _method(method)
    if name == "pointwise":
        return n
    if name == "pairwise":
        return tournament_bound(n, k)
    return window_bound(n, k, window=LISTWISE_WINDOW, step=LISTWISE_STEP)


def explain_line(method: str | None, k: int, n: int | None) -> str:
    """What ``EXPLAIN SEMANTIC`` says of one ``sem_topk``: its method and call bound (``n``:
    the input's rows when known before the run)."""
    name = _method(method)
    bound = _FORMULA[name]
    if n is not None:
        bound += f" = {call_bound(name, n, k):,} for n = {n:,} rows"
    return f"sem_topk(k = {k}): method {name} ({_HOW[name]}); calls ≤ {bound}"


def rank_rows(
    table: pa.Table,
    template: str,
    columns: Sequence[str],
    k: int,
    *,
    method: str,
    engine: SemEngine,
    query: QueryContext,
    options: CallOptions = DEFAULT_OPTIONS,
) -> list[int]:
    """The row indices of ``table``'s ``k`` best rows, best first, by ``'pairwise'`` or
    ``'listwise'`` comparisons of ``template`` (positional; field ``{i}`` is ``columns[i]``)."""
    name = _method(method)
    if name == "pointwise":
        raise ValueError("pointwise ranking is the score order of table_sources.topk_batches")
    args = [table.column(c).combine_chunks() for c in columns]
    valid = _valid_rows(args, table.num_rows)
    judge = _Judge(engine, template, columns, args, valid, query, options)
    if name == "pairwise":
        picked = [valid[i] for i in tournament_topk(len(valid), k, judge.compare)]
    else:
        order, fallbacks = sliding_topk(list(range(len(valid))), k, judge.rank_window,
                                        window=LISTWISE_WINDOW, step=LISTWISE_STEP)  # fmt: skip
        if fallbacks:
            query.add(rank_fallbacks=fallbacks)
        picked = [valid[i] for i in order]
    ranked = set(valid)
    rest = [i for i in range(table.num_rows) if i not in ranked]  # NULL inputs: last
    return (picked + rest)[:k]


def _flip(a: int, b: int) -> bool:
    """Whether the pair ``{a, b}`` is shown larger index first: about half of all pairs, and
    of every tournament round's (a parity of ``a + b`` would flip every first-round pair)."""
    low, high = min(a, b), max(a, b)
    return bool((((low * 40_503) ^ (high * 2_654_435_761)) >> 7) & 1)


def _valid_rows(args: Sequence[pa.Array], rows: int) -> list[int]:
    if not args:
        return list(range(rows))
    mask = args[0].is_valid()
    for arg in args[1:]:
        mask = pc.and_(mask, arg.is_valid())
    return [i for i, ok in enumerate(mask.to_pylist()) if ok]


class _Judge:
    """Comparisons and windows of the candidates ``valid[i]``, asked through the engine."""

    def __init__(
        self,
        engine: SemEngine,
        template: str,
        columns: Sequence[str],
        args: Sequence[pa.Array],
        valid: list[int],
        query: QueryContext,
        options: CallOptions,
    ) -> None:
        self._engine, self._template, self._names = engine, template, list(columns)
        self._args, self._valid, self._query = args, valid, query
        # a call's examples are answers about one row: they fit neither a pair nor a window
        self._options = dataclasses.replace(options, examples=None, method=None)
        self._pair = pair_template(template, self._names)
        self._windows: dict[int, Template] = {}

    def _columns(self, groups: Sequence[Sequence[int]]) -> list[pa.Array]:
        """Per position in a group, every column of the candidates there, one row per group."""
        out: list[pa.Array] = []
        for position in range(len(groups[0])):
            rows = pa.array([self._valid[g[position]] for g in groups], type=pa.int64())
            out += [arg.take(rows) for arg in self._args]
        return out

    def compare(self, pairs: Sequence[tuple[int, int]]) -> list[bool | None]:
        """Whether the first of each pair ranks above the second. Which of the two is shown
        first is a hash of the pair (:func:`_flip`), so a judge's preference for the first
        shown (small models have one) is noise across the bracket, not a bias towards the
        input's first rows."""
        shown = [(b, a) if _flip(a, b) else (a, b) for a, b in pairs]
        answers = self._engine.completions(
            OperatorKind.JOIN, self._pair, self._columns(shown), query=self._query,
            label="sem_topk", options=self._options,
        )  # fmt: skip
        out: list[bool | None] = []
        for (a, _), (first, _), answer in zip(pairs, shown, answers, strict=True):
            value = None if answer is None else answer.value
            if not isinstance(value, bool):
                self._query.add(rank_fallbacks=1)
                out.append(None)
            else:
                out.append(value if first == a else not value)
        return out

    def rank_window(self, ids: Sequence[int]) -> tuple[list[int], bool]:
        """``ids`` best first, as one generated answer orders them."""
        size = len(ids)
        if size not in self._windows:
            self._windows[size] = window_template(self._template, self._names, size)
        options = dataclasses.replace(self._options, choices=(), max_tokens=5 * size + 8)
        (answer,) = self._engine.completions(
            OperatorKind.MAP, self._windows[size], self._columns([list(ids)]), query=self._query,
            label="sem_topk", options=options,
        )  # fmt: skip
        text = None if answer is None or answer.value is None else str(answer.value)
        order, whole = parse_permutation(text, size)
        return [ids[j] for j in order], whole
