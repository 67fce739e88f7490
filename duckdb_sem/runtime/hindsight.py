"""What each SEU really cost, and whether its plan was a good choice in hindsight.

After a batch the loop knows what every operator it reached did (an
:class:`~duckdb_sem.estimator.refine.Observation` each). Its actual cost is the same token
cost the optimizer estimates, prompt tokens plus weighted completion tokens
(:func:`observed_cost`). Every candidate is then re-costed on the batch with the observed
statistics (estimates only for operators the plan never reached) and the plan that ran counts
as a good choice when it was one of the two cheapest (:func:`hindsight_top2`). Both go into the
batch's :class:`~duckdb_sem.estimator.accuracy.BatchRecord`; :func:`with_profile_seconds`
adds the estimator's time before the first SEU to the records' summary.

Example: candidates re-costed at 120, 80 and 100 tokens: the plans costing 80 and 100 were
top-2 choices, the one costing 120 was not.
"""

from __future__ import annotations

from duckdb_sem.estimator.accuracy import AccuracyReport, BatchRecord, summarize
from duckdb_sem.estimator.refine import Observation
from duckdb_sem.estimator.remaining import llm_cost
from duckdb_sem.optimizer.cost import CostModel, Statistics
from duckdb_sem.plan.nodes import Node

__all__ = ["hindsight_top2", "observed_cost", "with_profile_seconds"]


def observed_cost(observations: list[Observation]) -> float:
    """Prompt tokens plus weighted completion tokens of what the batch's operators did."""
    w = CostModel().defaults.completion_weight
    return sum(o.prompt_tokens + w * o.completion_tokens for o in observations)


def hindsight_top2(
    regions: list[Node],
    plan: int,
    observations: list[Observation],
    estimated: dict[str, Statistics],
    *,
    table_rows: dict[str, float],
    fixed: int | None,
) -> bool | None:
    """Whether ``regions[plan]`` was one of the two cheapest candidates on this batch,
    re-costed with what the batch showed (observed statistics; estimates for unreached
    operators) over ``table_rows`` (the batch's rows for the driving table). None when there
    was no choice: a ``fixed`` plan, or a single candidate."""
    if fixed is not None or len(regions) < 2:
        return None
    seen = dict(estimated)
    for o in observations:
        if o.rows_in > 0:
            seen[o.signature] = Statistics(o.rows_out / o.rows_in, o.prompt_tokens / o.rows_in,
                                           o.completion_tokens / o.rows_in, o.rows_in)  # fmt: skip
    model = CostModel(table_rows=table_rows, stats=seen)
    costs = [llm_cost(model, r) for r in regions]
    order = sorted(range(len(costs)), key=lambda i: costs[i])
    return costs[plan] <= costs[order[1]] * (1 + 1e-9)


def with_profile_seconds(records: list[BatchRecord], profile_seconds: float) -> AccuracyReport:
    """The records' accuracy summary, the estimator's time before the first SEU included."""
    report = summarize(records)
    return AccuracyReport(
        report.batches, report.within_10pct, report.median_error, report.top2,
        report.switches, report.estimator_seconds + profile_seconds, report.seconds,
    )  # fmt: skip
