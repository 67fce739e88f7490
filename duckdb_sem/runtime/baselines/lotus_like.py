"""``lotus-like``: the user's operator order, one operator at a time over the whole table.

No reordering and no batching of the plan: each semantic operator sees every row that reaches
it before the next operator starts, as LOTUS's pandas operators do. (The engine still cuts the
LLM requests into scheduler SEUs, so other queries are not blocked.)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from duckdb_sem.estimator.accuracy import AccuracyReport, BatchRecord, summarize
from duckdb_sem.optimizer.choose import plan_key
from duckdb_sem.plan.nodes import Node
from duckdb_sem.runtime.execute_plan import Evaluator, execute_plan
from duckdb_sem.runtime.progress import QueryProgress

__all__ = ["LotusRun"]

WHOLE_TABLE = 1 << 40


class LotusRun:
    def __init__(
        self, con: Any, written: Node, engine: Evaluator, query: Any, *, target_clock: Any = None
    ) -> None:
        self.con = con
        self.written = written
        self.engine = engine
        self.query = query
        self.target_clock = target_clock
        self.records: list[BatchRecord] = []
        self._done = False

    def _clock(self) -> float:
        if self.target_clock is not None:
            return float(self.target_clock.virtual_seconds)
        return time.perf_counter()

    def batches(self) -> Iterator[pa.RecordBatch]:
        started = self._clock()
        table = execute_plan(self.con, self.written, self.engine, self.query,
                             batch_size=WHOLE_TABLE)  # fmt: skip
        self.records.append(BatchRecord(0, table.num_rows, plan_key(self.written), 0.0, 0.0, 0.0,
                                        seconds=self._clock() - started,
                                        rows_out=table.num_rows))  # fmt: skip
        self._done = True
        yield from table.to_batches() or [pa.RecordBatch.from_pylist([], schema=table.schema)]

    def progress(self) -> QueryProgress:
        return QueryProgress(mode="lotus-like", batches_done=len(self.records),
                             plan=plan_key(self.written), finished=self._done)  # fmt: skip

    def report(self) -> AccuracyReport:
        return summarize(self.records)
