"""Cost estimation for semantic plans (SeqoFlow's small-model estimator).

- :mod:`.stats`: the statistics store, keyed by operator signature, shared by every plan;
- :mod:`.profile`: sampling profiler, representative rows through each operator on a small
  *estimator* backend, token counts under the *target* backend's tokenizer;
- :mod:`.refine`: online refinement from each batch's observed outcomes;
- :mod:`.remaining`: the cost of a plan over some rows, and a running query's remaining cost;
- :mod:`.accuracy`: the paper's accuracy metrics (within 10%, top-2 plan, pair order, Spearman).
"""

from duckdb_sem.estimator.accuracy import (
    AccuracyReport,
    BatchRecord,
    pair_order_accuracy,
    spearman_rho,
    summarize,
)
from duckdb_sem.estimator.profile import Profiler, ProfileResult
from duckdb_sem.estimator.refine import Observation, observe_batch
from duckdb_sem.estimator.remaining import plan_cost, remaining_cost
from duckdb_sem.estimator.stats import StatsStore

__all__ = [
    "AccuracyReport",
    "BatchRecord",
    "Observation",
    "ProfileResult",
    "Profiler",
    "StatsStore",
    "observe_batch",
    "pair_order_accuracy",
    "plan_cost",
    "remaining_cost",
    "spearman_rho",
    "summarize",
]
