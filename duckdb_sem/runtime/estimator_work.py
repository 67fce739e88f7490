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

from duckdb_sem.llm.request import Completion, LLMRequest
from duckdb_sem.runtime.context import QueryContext
from duckdb_sem.runtime.submit import ESTIMATOR, submit
from duckdb_sem.scheduler.seu import SchedulerClient

__all__ = ["ESTIMATOR_LABEL", "scheduled_samples"]

#: the operator label of estimator SEUs (metrics, ``duckdb-sem top``)
ESTIMATOR_LABEL = "estimator"


def scheduled_samples(
    client: SchedulerClient, query: QueryContext | None
) -> Callable[[Sequence[LLMRequest]], list[Completion]]:
    """A ``complete(requests)`` that submits the requests as one SEU of ``query``."""

    def complete(requests: Sequence[LLMRequest]) -> list[Completion]:
        context = query if query is not None else QueryContext(query_id="estimator")
        items = [(r.signature(client.backend_id), r) for r in requests]
        answered = submit(client, items, query=context, label=ESTIMATOR_LABEL,
                          ledger=ESTIMATOR, batch_size=max(1, len(items)))  # fmt: skip
        context.add(estimator_calls=len(requests))
        return [completion for _, completion, _ in answered]

    return complete
