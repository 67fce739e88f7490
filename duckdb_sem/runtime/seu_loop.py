"""The SEU loop: a query as a sequence of batches, the plan re-chosen before each one.

One SEU is one batch of rows of the *driving* table (the largest scan) through the current
plan's row-wise region; the other tables are read whole by every SEU (their semantic answers
come from the query's memo after the first one). Before each SEU the loop

1. estimates: prompt tokens are counted on the batch (free); the operators whose statistics
   that leaves in doubt are sampled on the small model (:meth:`Profiler.profile_batch`); the
   observed outcomes of earlier batches are the primary statistics (:class:`Refiner`);
2. chooses: every candidate plan is re-costed on the batch and the cheapest runs it, if it
   saves more than ``switch_margin`` (``static`` keeps one plan); finished batches are never
   redone, so switching costs nothing;
3. publishes the query's estimated remaining cost (``QueryContext.remaining_cost``, which the
   engine puts on every scheduler SEU for SRTF) and its :class:`QueryProgress`;
4. runs the batch; between its LLM requests the scheduler may run other queries (preemption);
5. refines the statistics from what each operator really did, and records estimate vs actual
   (and whether the plan was one of the two cheapest on the batch, re-costed in hindsight).

Results stream: a sink that is a plain projection is applied per batch and the batch is
yielded; any other sink (aggregation, DISTINCT, ORDER BY, LIMIT, ``sem_agg``) keeps the region's
output rows (not the input) and runs once at the end.

Cutting the driving table into batches is :mod:`.batching`; running one SEU's region over its
batch, registered as a view, is :mod:`.seu_views`; the actual cost and hindsight top-2 of each
:class:`BatchRecord` are :mod:`.hindsight`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from duckdb_sem.estimator.accuracy import AccuracyReport, BatchRecord
from duckdb_sem.estimator.profile import Profiler, semantic_calls
from duckdb_sem.estimator.refine import Refiner, observe_batch
from duckdb_sem.estimator.remaining import llm_cost, remaining_cost
from duckdb_sem.estimator.stats import StatsStore
from duckdb_sem.optimizer.choose import plan_key
from duckdb_sem.optimizer.cost import CostModel, Statistics, operator_signature, scan_key
from duckdb_sem.plan.nodes import Node, SemCall
from duckdb_sem.runtime.batching import (
    adapt_rows,
    driving_scan,
    empty_batch,
    rebatch,
    streamable,
    streamed_projection,
)
from duckdb_sem.runtime.early_stop import StopRule, next_rows, region_rate, stop_rule
from duckdb_sem.runtime.execute_plan import Actual, Evaluator, Path, split_sink
from duckdb_sem.runtime.hindsight import hindsight_top2, observed_cost, with_profile_seconds
from duckdb_sem.runtime.observe import ObservingEvaluator
from duckdb_sem.runtime.progress import QueryProgress, RuntimeOptions
from duckdb_sem.runtime.seu_views import run_region, run_sink
from duckdb_sem.runtime.windows import driving_reader

__all__ = ["QueryRun"]


class QueryRun:
    """One query on the SEU loop over ``plans`` (candidates with the same sink)."""

    def __init__(
        self,
        con: Any,
        plans: list[Node],
        engine: Evaluator,
        query: Any,
        *,
        options: RuntimeOptions,
        profiler: Profiler,
        table_rows: dict[str, float],
        store: StatsStore | None = None,
        fixed: int | None = None,
        actuals: dict[Path, Actual] | None = None,
        target_clock: Any = None,
    ) -> None:
        self.con = con
        self.plans = plans
        self.options = options
        self.query = query
        self.profiler = profiler
        self.table_rows = dict(table_rows)
        self.store = store or StatsStore()
        self.refiner = Refiner(self.store)
        # the rows left are forecast from the whole query's outcomes (long memory), not from
        # the last batches: batches of several kinds are to come, in the mix seen so far
        self.forecast = StatsStore(decay=0.95)
        self.forecast.seed(self.store.snapshot())
        self.fixed = fixed
        self.actuals = actuals
        self.target_clock = target_clock  # an object with virtual_seconds (SIMULATED target)
        self.records: list[BatchRecord] = []
        self.profile_seconds = 0.0  # estimator time before the first SEU
        self.current = fixed if fixed is not None else 0
        self._sinks, self._regions, self._paths = [], [], []
        for plan in plans:
            sink, region, path = split_sink(plan)
            self._sinks.append(sink)
            self._regions.append(region)
            self._paths.append(path)
        calls: dict[str, SemCall] = {}
        labels: dict[str, str] = {}
        for region in self._regions:
            for op in semantic_calls(region):
                call: SemCall = op.call  # type: ignore[attr-defined]
                calls[operator_signature(call)] = call
                labels[op.label()] = operator_signature(call)
        for op in self._sinks[0]:
            if hasattr(op, "call"):
                labels[op.label()] = operator_signature(op.call)
        self.calls = list(calls.values())
        self.observer = ObservingEvaluator(engine, labels)
        self.driving = driving_scan(self._regions[0], self.table_rows)
        self.rows_total = 0
        self._rows_done = 0
        self._rows_out = 0
        self._remaining = 0.0
        self._finished = False
        self._rows_sent = 0  # rows streamed out under a LIMIT
        self._rows_running = 0  # driving rows of the SEU in flight

    # -- observability ----------------------------------------------------------------------
    def progress(self) -> QueryProgress:
        return QueryProgress(
            query_id=getattr(self.query, "query_id", ""),
            mode=self.options.mode,
            batches_done=len(self.records),
            rows_done=self._rows_done,
            rows_total=self.rows_total,
            rows_in_flight=self._rows_running,
            rows_out=self._rows_out,
            estimated_remaining_cost=self._remaining,
            plan_switches=sum(1 for r in self.records if r.switched),
            plan=plan_key(self._regions[self.current]),
            finished=self._finished,
        )

    def report(self) -> AccuracyReport:
        return with_profile_seconds(self.records, self.profile_seconds)

    # -- running ------------------------------------------------------------------------------
    def batches(self) -> Iterator[pa.RecordBatch]:
        """Run every SEU; yields the query's result batches as they are produced.

        Under a LIMIT the loop stops once the rows the LIMIT needs are out
        (:mod:`.early_stop`): SEUs are then sized to fill it, not by time.
        """
        scan = self.driving
        stop = stop_rule(self._sinks[0], scan)
        # on the session's own connection, a window at a time (the batch work below runs
        # queries on it between windows): the statement's transaction, TEMP tables, settings
        reader, self.rows_total = driving_reader(
            self.con, scan, order=stop.order if stop is not None else (),
            first=self.options.batch_rows,
        )  # fmt: skip
        try:
            yield from self._loop(reader, stop)
        finally:
            self._remaining = 0.0
            self._rows_running = 0
            if self.query is not None:
                self.query.remaining_cost = None
                self.observer.finish(getattr(self.query, "query_id", ""))
        self._finished = True

    def _loop(
        self, reader: pa.RecordBatchReader, stop: StopRule | None
    ) -> Iterator[pa.RecordBatch]:
        stream = streamable(self._sinks[0])
        kept: list[pa.Table] = []
        size = self.options.batch_rows
        batch_iter = rebatch(reader)
        produced = False
        need_left = stop.need if stop is not None else 0
        skip = stop.offset if stop is not None else 0
        previous: int | None = None
        while True:
            if stop is not None:
                size = self._limit_rows(need_left, previous)
                if size == 0 and produced:
                    break
            batch = batch_iter(size) if size else None
            if batch is None and produced:
                break
            if batch is None:
                batch = reader.schema.empty_table()
            produced = True
            previous = batch.num_rows
            self._stop_if_cancelled()
            started = time.perf_counter()
            out = self._seu(batch)
            if stop is not None:
                need_left -= out.num_rows
            if stream:
                if len(self.records) == 1:
                    yield empty_batch(out.schema)  # the schema, as soon as it is known
                if stop is not None:  # cut to OFFSET/LIMIT here: the sink streams
                    out, skip = _cut(out, skip, stop.limit - self._rows_sent)
                    self._rows_sent += out.num_rows
                yield from out.to_batches()
            else:
                kept.append(out)
            if self.options.adapt_batch and stop is None:
                size = adapt_rows(size, time.perf_counter() - started, self.options)
        if not stream:
            self._stop_if_cancelled()
            final = self._finish(kept)
            yield empty_batch(final.schema)
            yield from final.to_batches()

    def _limit_rows(self, need_left: int, previous: int | None) -> int:
        """The next SEU's driving rows under a LIMIT (0: the LIMIT is filled)."""
        if previous is not None and self._rows_done >= self.rows_total:
            return 0
        if previous is None:
            rate = region_rate(self._regions[self.current], self.driving, self.table_rows,
                               self.forecast.snapshot())  # fmt: skip
        else:
            rate = self._rows_out / self._rows_done if self._rows_done else 0.0
        return next_rows(need_left, rate, previous=previous, first_max=self.options.batch_rows,
                         ceiling=self.options.max_batch_rows)  # fmt: skip

    def _estimate(self, batch: pa.Table) -> tuple[list[float], dict[str, Statistics]]:
        est_before = self.profiler.seconds
        sample = self._sample(batch) if batch.num_rows and self.options.mode != "lotus-like" else {}
        self._est_seconds = self.profiler.seconds - est_before
        stats: dict[str, Statistics] = {}
        for call in self.calls:
            sig = operator_signature(call)
            s = self.refiner.estimate(sig, sample.get(sig))
            if s is not None:
                stats[sig] = s
        rows = dict(self.table_rows)
        rows[scan_key(self.driving.alias)] = float(batch.num_rows)
        model = CostModel(table_rows=rows, stats=stats)
        if self.fixed is not None:
            costs = [0.0] * len(self._regions)
            costs[self.fixed] = llm_cost(model, self._regions[self.fixed])
        else:
            costs = [llm_cost(model, r) for r in self._regions]
        return costs, stats

    def _sample(self, batch: pa.Table) -> dict[str, Statistics]:
        """Counted prompt tokens for every operator; the estimator's sample for those whose
        statistics are in doubt (``sample_policy="stale"``) or for all (``"always"``)."""
        if self.options.sample_policy == "always" or self.profiler.estimator is None:
            return self.profiler.profile_batch(batch, self.calls)
        counted = self.profiler.profile_batch(batch, self.calls, sample=False)
        doubt = [c for c in self.calls if (sig := operator_signature(c)) in counted
                 and self.refiner.needs_sample(sig, counted[sig].prompt_tokens_per_row)]  # fmt: skip
        if doubt:
            counted.update(self.profiler.profile_batch(batch, doubt))
        return counted

    def _seu(self, batch: pa.Table) -> pa.Table:
        n = self._rows_running = batch.num_rows
        costs, estimated = self._estimate(batch)
        previous = self.current
        if self.fixed is None:
            best = min(range(len(costs)), key=lambda i: (costs[i], i != previous, i))
            # hysteresis: switch only for a real saving, so estimation noise does not flap
            if costs[best] < costs[previous] * (1 - max(self.options.switch_margin, 1e-9)):
                self.current = best
        plan = self.current
        left = self.rows_total - self._rows_done - n
        self._remaining = costs[plan] + remaining_cost(
            self._regions[plan], self.forecast.snapshot(), table_rows=self.table_rows,
            driving_table=scan_key(self.driving.alias), rows_left=max(left, 0),
        )  # fmt: skip
        if self.query is not None:
            self.query.remaining_cost = self._remaining
        self._bound_memo(n)
        clock = self._clock()
        out = self._run_region(plan, batch)
        spent = self._clock() - clock
        observations = self.observer.take()
        for obs in observations:
            self.refiner.observe(obs)
        observe_batch(self.forecast, observations)
        actual = observed_cost(observations)
        top2 = hindsight_top2(
            self._regions, plan, observations, estimated, fixed=self.fixed,
            table_rows={**self.table_rows, scan_key(self.driving.alias): float(n)},
        ) if n else None  # fmt: skip
        self._rows_done += n
        self._rows_running = 0
        self._rows_out += out.num_rows
        self.records.append(
            BatchRecord(
                index=len(self.records), rows=n, plan=plan_key(self._regions[plan]),
                estimated_cost=costs[plan], actual_cost=actual,
                estimated_remaining=self._remaining, switched=plan != previous,
                estimator_seconds=self._est_seconds, seconds=spent, rows_out=out.num_rows,
                top2=top2,
            )
        )  # fmt: skip
        return out

    def _stop_if_cancelled(self) -> None:
        """An SEU boundary: a cancelled query stops here, also when the rest of its work would
        come from the memo or the cache and so never wait on the scheduler."""
        if self.query is not None:
            self.query.raise_if_cancelled()

    def _bound_memo(self, rows: int) -> None:
        """Size the query's memo to a few batches (plus the small tables every SEU re-reads):
        it only dedupes within the query, so it need not grow with the driving table."""
        memo = getattr(self.query, "memo", None)
        if memo is None or not hasattr(memo, "capacity"):
            return
        others = sum(v for k, v in self.table_rows.items() if k != self.driving.table)
        calls = max(1, len(self.calls))
        want = int(4 * max(rows, self.options.batch_rows) * calls + others * calls)
        memo.capacity = max(1024, min(self.options.memo_limit, want))

    def _clock(self) -> float:
        if self.target_clock is not None:
            return float(self.target_clock.virtual_seconds)
        return time.perf_counter()

    def _run_region(self, plan: int, batch: pa.Table) -> pa.Table:
        actuals = self.actuals if plan == (self.fixed if self.fixed is not None else 0) else None
        return run_region(
            self.con, self.observer, self.query, region=self._regions[plan],
            path=self._paths[plan], project=streamed_projection(self._sinks[plan]), driving_alias=self.driving.alias,
            batch=batch, actuals=actuals, order_pairs=self.options.order_pairs,
        )  # fmt: skip

    def _finish(self, kept: list[pa.Table]) -> pa.Table:
        plan = self.current
        return run_sink(
            self.con, self.observer, self.query, root=self.plans[plan],
            region=self._regions[plan], kept=kept, actuals=self.actuals,
        )  # fmt: skip


def _cut(out: pa.Table, skip: int, room: int) -> tuple[pa.Table, int]:
    """``out`` less the ``skip`` rows an OFFSET still drops, at most ``room`` rows; the skip left."""
    dropped = min(skip, out.num_rows)
    return out.slice(dropped, max(0, min(room, out.num_rows - dropped))), skip - dropped
