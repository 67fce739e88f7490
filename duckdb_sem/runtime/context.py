"""Per-query state: identity, cancellation, counters and progress events.

Counters come in two kinds (as in LOTUS): *virtual* usage counts every LLM request a query
asked for, as if nothing were cached or shared; *physical* usage counts what the backend actually
ran for it. The difference is what the cache, in-query deduplication and cross-query fusion saved.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from duckdb_sem.errors import QueryCancelledError

__all__ = ["Memo", "Progress", "QueryContext", "QueryStats"]

_query_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class QueryStats:
    """A snapshot of one query's LLM usage (``con.stats()``)."""

    query_id: str = ""
    llm_calls: int = 0  # virtual: requests asked for, as if nothing were cached
    prompt_tokens: int = 0
    completion_tokens: int = 0
    physical_calls: int = 0  # requests the backend ran for this query
    physical_prompt_tokens: int = 0
    physical_completion_tokens: int = 0
    # of physical_prompt_tokens, those the backend took from its KV or prefix cache
    physical_cached_tokens: int = 0
    cache_hits: int = 0  # answered from the persistent cache
    fused: int = 0  # shared with an identical request of another query in flight
    deduplicated: int = 0  # identical requests within this query, asked once
    null_outputs: int = 0  # unparseable after retries, returned as NULL (a warning each)
    # sem_topk's pairwise and listwise methods (runtime.ranking): answers that could not be read
    # as a comparison or a whole permutation, so a fallback order was used
    rank_fallbacks: int = 0
    seus: int = 0
    # the estimator's samples (a small model's work, not the target's; scheduled and cached)
    estimator_calls: int = 0
    estimator_physical_calls: int = 0  # samples the estimator's model ran
    estimator_cache_hits: int = 0
    rows: int = 0  # rows that went through semantic operators
    llm_wait_seconds: float = 0.0
    # the embedding model's work (runtime.embeddings): not LLM calls, counted apart
    embed_calls: int = 0  # virtual: texts asked for, as if nothing were cached
    embed_physical_calls: int = 0  # texts the embedding model ran for this query
    embed_cache_hits: int = 0
    embed_wait_seconds: float = 0.0
    # a cascaded sem_filter (runtime.cascade): the helper's work, and who decided each row
    helper_calls: int = 0  # virtual: rows the helper model scored (embeddings: embed_calls)
    helper_physical_calls: int = 0  # rows the helper model ran (not cached)
    helper_cache_hits: int = 0
    cascade_helper_rows: int = 0  # rows the helper decided, no target call
    cascade_target_rows: int = 0  # rows the target answered (its sample included)
    #: USD the backends' reported tokens cost at the models' prices (``runtime.money``)
    cost_usd: float = 0.0

    @property
    def prefix_hit_rate(self) -> float:
        """Share of the prompt tokens sent to a backend that it took from its KV or prefix
        cache (0.0 when nothing was sent, or the backend does not say)."""
        if not self.physical_prompt_tokens:
            return 0.0
        return self.physical_cached_tokens / self.physical_prompt_tokens

    def as_dict(self) -> dict[str, float | int | str]:
        out: dict[str, float | int | str] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["prefix_hit_rate"] = self.prefix_hit_rate
        return out


@dataclass(frozen=True, slots=True)
class Progress:
    """Emitted after each SEU: what a progress bar or ``duckdb-sem top`` shows."""

    query_id: str
    operator: str
    rows_done: int
    rows_total: int
    seus: int


class Memo:
    """The in-query answer memo: least recently used entries go past ``capacity``.

    It only dedupes identical requests within a query (the persistent cache is what spans
    queries), so a few batches' worth of answers is enough; the SEU loop sizes it from the
    batch size so memory does not grow with the table.

    Example:
        >>> m = Memo(capacity=2)
        >>> m["a"], m["b"], m["c"] = 1, 2, 3
        >>> "a" in m, len(m)
        (False, 2)
    """

    def __init__(self, *, capacity: int = 50_000) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, object] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: str) -> object | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def __getitem__(self, key: str) -> object:
        with self._lock:
            self._items.move_to_end(key)
            return self._items[key]

    def __setitem__(self, key: str, value: object) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > max(1, self.capacity):
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


@dataclass(eq=False)
class QueryContext:
    """Mutable, thread-safe (DuckDB may call UDFs from several threads)."""

    query_id: str = field(
        default_factory=lambda: f"q{next(_query_ids)}-{int(time.time() * 1000) % 10**8}"
    )
    connection: str = ""
    on_progress: Callable[[Progress], None] | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)
    _counts: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # In-query memo: identical requests run once per query even without a persistent cache.
    memo: Memo = field(default_factory=Memo)
    # The SEU loop's estimate of the LLM cost left (token-equivalents); None: not planned.
    remaining_cost: float | None = None
    # The running plan-level query (``runtime.seu_loop.QueryRun``), for ``semantic_progress()``.
    run: object | None = None
    # Limits of this query's backend work (``runtime.budget.Budget``); None: none.
    budget: Any = None
    # The price of each model's client (``runtime.money.Pricing``); None: every model $0.
    pricing: Callable[[Any], Any] | None = None
    # Cascaded sem_filters' learning state by operator (``runtime.cascade.Cascades``).
    cascades: Any = None
    # Approximate plans considered and not taken, and why (``runtime.approximation.decline``;
    # EXPLAIN SEMANTIC lists them).
    declined: list[str] = field(default_factory=list)

    def raise_if_cancelled(self) -> None:
        """Raise :class:`~duckdb_sem.errors.QueryCancelledError` once the query was cancelled:
        what every SEU boundary calls, so work answered from the memo or the cache (which
        never waits on the scheduler) stops there too."""
        if self.cancelled.is_set():
            raise QueryCancelledError(f"query {self.query_id} was cancelled")

    def add(self, **deltas: float) -> None:
        with self._lock:
            for key, value in deltas.items():
                self._counts[key] = self._counts.get(key, 0) + value

    def counts(self) -> dict[str, float]:
        """The raw counters so far (what :meth:`stats` reports)."""
        with self._lock:
            return dict(self._counts)

    def stats(self) -> QueryStats:
        with self._lock:
            counts = dict(self._counts)
        kwargs: dict[str, object] = {"query_id": self.query_id}
        for f in fields(QueryStats):
            if f.name in counts:
                kwargs[f.name] = (
                    float(counts[f.name]) if isinstance(f.default, float) else int(counts[f.name])
                )
        return QueryStats(**kwargs)  # type: ignore[arg-type]

    def emit(self, progress: Progress) -> None:
        if self.on_progress is not None:
            self.on_progress(progress)
