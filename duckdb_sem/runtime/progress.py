"""What a running query exposes at every SEU boundary, and how it is asked to run.

``QueryProgress`` is a snapshot (``con.semantic_progress()``, the CLI progress line); within an
SEU, ``con.on_progress`` gets a ``runtime.context.Progress`` after every backend batch;
``RuntimeOptions`` selects the runtime per query: the adaptive SEU loop or a baseline.
"""

from __future__ import annotations

from dataclasses import dataclass

from duckdb_sem.backends.base import Backend
from duckdb_sem.config import ESTIMATOR_SAMPLE, RUNTIME, SEU_ROWS
from duckdb_sem.errors import ConfigError
from duckdb_sem.plan.nodes import Node
from duckdb_sem.runtime.approximation import Approximation
from duckdb_sem.scheduler.seu import SchedulerClient

__all__ = ["MODES", "QueryProgress", "RuntimeOptions"]

#: adaptive: re-choose the plan before each SEU (SeqoFlow); static: one plan (given, or chosen
#: once at start); static-best: every candidate run, the cheapest in hindsight kept; eddies:
#: per-tuple routing among commuting filters; lotus-like: the written order, one operator at a
#: time over the whole table.
MODES = ("adaptive", "static", "static-best", "eddies", "lotus-like")


@dataclass(frozen=True, slots=True)
class QueryProgress:
    """A query's progress at an SEU boundary."""

    query_id: str = ""
    mode: str = ""
    batches_done: int = 0
    rows_done: int = 0  # rows of the driving table processed
    rows_total: int = 0
    rows_in_flight: int = 0  # driving rows of the SEU running now (not yet in rows_done)
    rows_out: int = 0
    estimated_remaining_cost: float = 0.0  # token-equivalents, under the current plan
    plan_switches: int = 0
    plan: str = ""
    finished: bool = False

    @property
    def fraction(self) -> float:
        return self.rows_done / self.rows_total if self.rows_total else float(self.finished)


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeOptions:
    """How one query runs; see :data:`MODES`."""

    mode: str = RUNTIME
    batch_rows: int = SEU_ROWS  # rows of the driving table per SEU (the first when adapting)
    adapt_batch: bool = True  # grow/shrink batches toward ``target_seu_seconds``
    target_seu_seconds: float = 2.0
    min_batch_rows: int = 16
    max_batch_rows: int = 8192
    estimator: Backend | None = None  # the small model that samples each batch
    # its scheduler (``scheduler.shared``): samples become SEUs of the query, cached and
    # cancellable; None: the profiler calls the estimator directly (benchmarks, tests)
    estimator_client: SchedulerClient | None = None
    sample_rows: int = ESTIMATOR_SAMPLE  # rows per operator the estimator answers, per batch
    # stale: sample an operator only when counted tokens and past outcomes leave it in doubt
    # (first batches, a new token profile, a drifted outcome); always: every batch.
    sample_policy: str = "stale"
    # switch plans only when the best saves more than this share of the current plan's cost
    switch_margin: float = 0.02
    plan: Node | None = None  # static: this plan (else the one chosen at start)
    max_candidates: int = 128  # plans re-costed before each SEU
    seed: int = 7
    # The query's answer memo is an LRU sized to a few batches, never above this many entries,
    # so memory stays bounded on any table (older answers come from the persistent cache).
    memo_limit: int = 50_000
    # lossy plans (sem_join blocking) and their targets; None or not allowed: lossless only
    approximation: Approximation | None = None
    # a cascaded sem_filter's helper: auto, estimator, embed or a backend spec (runtime.cascade)
    filter_helper: str = "auto"
    helper_client: SchedulerClient | None = None  # its scheduler, when a backend spec
    # a semantic join asks its pairs by the template's first field, so pairs sharing that
    # value share the backend's KV or prefix cache (runtime.pair_order); answers are the same
    order_pairs: bool = True

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"unknown runtime mode {self.mode!r}; use one of {', '.join(MODES)}")
        if self.sample_policy not in ("stale", "always"):
            raise ConfigError(
                f"sample_policy must be 'stale' or 'always', got {self.sample_policy!r}"
            )
        if self.batch_rows < 1 or self.min_batch_rows < 1 or self.sample_rows < 0:
            raise ConfigError("batch_rows and min_batch_rows must be >= 1, sample_rows >= 0")
