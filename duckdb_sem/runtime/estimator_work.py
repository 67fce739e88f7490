"""The estimator's samples as SEUs of the query they estimate.

The small model that samples each batch (``DUCKDB_SEM_ESTIMATOR_BACKEND``) is a backend like
any other, so its work goes through a scheduler of its own (one per estimator backend per
process, from ``scheduler.shared``): its answers are cached and fused, and a cancelled query's
samples are dropped with the rest of its work. The query's statistics count them apart
(``QueryStats.estimator_calls``, ``estimator_cache_hits``), so ``con.stats().llm_calls`` stays
the target's work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import TimeoutError as FutureTimeout

from duckdb_sem.errors import QueryCancelledError
from duckdb_sem.llm.request import Completion, LLMRequest
from duckdb_sem.runtime.context import QueryContext
from duckdb_sem.scheduler.seu import SEU, SchedulerClient, Served

__all__ = ["ESTIMATOR_LABEL", "scheduled_samples"]

#: the operator label of estimator SEUs (metrics, ``duckdb-sem top``)
ESTIMATOR_LABEL = "estimator"


def scheduled_samples(
    client: SchedulerClient, query: QueryContext | None
) -> Callable[[Sequence[LLMRequest]], list[Completion]]:
    """A ``complete(requests)`` that submits the requests as one SEU of ``query``."""

    def complete(requests: Sequence[LLMRequest]) -> list[Completion]:
        query_id = query.query_id if query is not None else "estimator"
        seu = SEU(query_id, ESTIMATOR_LABEL, tuple(requests), 0.0,
                  query.connection if query is not None else "")  # fmt: skip
        future = client.submit(seu)
        while True:
            if query is not None and query.cancelled.is_set():
                client.cancel(query.query_id)
                raise QueryCancelledError(f"query {query.query_id} was cancelled")
            try:
                result = future.result(timeout=0.05)
                break
            except FutureTimeout:
                continue
        if query is not None:
            hits = sum(1 for s in result.served if s is Served.CACHE)
            query.add(estimator_calls=len(requests), estimator_cache_hits=hits)
        return list(result.completions)

    return complete
