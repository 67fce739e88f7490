"""``static-best``: the fixed plan that was cheapest in hindsight, found by running all.

Every candidate (up to ``limit``) runs on the SEU loop with that one plan, from scratch and
with its own query context (no answers shared between the runs); the cheapest by target time
(the simulated clock when SIMULATED) or else by token cost is kept. Its records and result are
the baseline's; the others are kept in :attr:`StaticBest.costs` for reports. This is an oracle
baseline for benchmarks, not something to run in production.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from duckdb_sem.estimator.accuracy import AccuracyReport, BatchRecord, summarize
from duckdb_sem.estimator.stats import StatsStore
from duckdb_sem.plan.nodes import Node
from duckdb_sem.runtime.context import QueryContext
from duckdb_sem.runtime.execute_plan import Evaluator
from duckdb_sem.runtime.progress import QueryProgress
from duckdb_sem.runtime.seu_loop import QueryRun

__all__ = ["StaticBest"]


class StaticBest:
    def __init__(
        self,
        con: Any,
        plans: list[Node],
        engine: Evaluator,
        query: Any,
        *,
        limit: int = 24,
        **common: Any,
    ) -> None:
        self.con = con
        self.plans = plans[:limit]
        self.engine = engine
        self.query = query
        self.common = common
        self.records: list[BatchRecord] = []
        self.costs: list[float] = []  # per candidate: seconds (or token cost) of its run
        self.best = 0
        self._progress = QueryProgress(mode="static-best")

    def batches(self) -> Iterator[pa.RecordBatch]:
        results: list[tuple[float, pa.Table, QueryRun]] = []
        store: StatsStore = self.common["store"]
        seeded = store.snapshot()
        for i in range(len(self.plans)):
            own = StatsStore()
            own.seed(seeded)
            common = dict(self.common, store=own,
                          options=dataclasses.replace(self.common["options"], mode="static"))  # fmt: skip
            run = QueryRun(self.con, self.plans, self.engine, self._context(), fixed=i, **common)
            table = pa.Table.from_batches(list(run.batches()))
            timed = run.target_clock is not None
            cost = sum(r.seconds if timed else r.actual_cost for r in run.records)
            results.append((cost, table, run))
            self.costs.append(cost)
            self._progress = run.progress()
        self.best = min(range(len(results)), key=lambda i: results[i][0])
        _, table, run = results[self.best]
        self.records = run.records
        self._progress = dataclasses.replace(run.progress(), mode="static-best")
        yield from table.to_batches() or [pa.RecordBatch.from_pylist([], schema=table.schema)]

    def _context(self) -> Any:
        if self.query is None:
            return None
        return QueryContext(connection=self.query.connection, cancelled=self.query.cancelled)

    def progress(self) -> QueryProgress:
        return self._progress

    def report(self) -> AccuracyReport:
        return summarize(self.records)
