"""Run a chosen logical plan: relational parts in DuckDB, semantic operators over Arrow batches.

Every maximal relational subtree becomes one SQL query (scans with their predicates, joins,
and at the top one SELECT for projection, aggregation, ordering and limit), so DuckDB plans and
pushes it down itself. A chain of row-wise semantic operators streams the result of the SQL
below it as record batches (``to_arrow_reader``) and sends each batch through the whole chain,
operator by operator, via the evaluator (the ``SemEngine``); the surviving rows are registered
back into DuckDB as an Arrow table for the SQL above. A semantic join streams the candidate
pairs (a cross join, or the relational join it refines) the same way; a blocked one (an
approximate plan) only the pairs its embedding block keeps (``runtime.blocking``), and a
cascaded sem_filter asks the target only the rows its helper is unsure of (``runtime.cascade``). Batch-wise execution is
what lets a later runtime switch plans between batches. The SQL text of scans, joins and the
sink is written by :mod:`.plan_sql`.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from duckdb_sem.llm.call_options import DEFAULT_OPTIONS, CallOptions
from duckdb_sem.llm.outputs import parse_type
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.optimizer.actuals import Actual
from duckdb_sem.plan.logical import LogicalPlan
from duckdb_sem.plan.nodes import (
    Aggregate,
    Filter,
    Join,
    Limit,
    Node,
    Project,
    Scan,
    SemAgg,
    SemCall,
    SemFilter,
    SemJoin,
    SemMap,
    Sort,
    quote,
)
from duckdb_sem.runtime.blocking import blocked_pairs
from duckdb_sem.runtime.cascade import run_cascade
from duckdb_sem.runtime.pair_order import order_pairs_sql, order_pairs_table
from duckdb_sem.runtime.plan_sql import Path, join_sql, scan_sql, sink_select, split_sink

__all__ = [
    "Actual",
    "Evaluator",
    "Path",
    "drop_views",
    "execute_plan",
    "relational_sql",
    "split_sink",
]

_names = itertools.count()


class Evaluator(Protocol):
    """What the executor needs from the engine (``SemEngine`` satisfies it)."""

    def run_operator(
        self,
        kind: OperatorKind,
        template: str,
        args: Sequence[pa.Array],
        *,
        output_type: str | None = None,
        query: Any,
        label: str = "",
        options: CallOptions = DEFAULT_OPTIONS,
        labels: tuple[str, ...] = (),
    ) -> pa.Array: ...


class SqlConnection(Protocol):
    def sql(self, query: str) -> Any: ...
    def register(self, view_name: str, python_object: object) -> Any: ...
    def unregister(self, view_name: str) -> Any: ...


def execute_plan(
    con: Any,
    plan: LogicalPlan | Node,
    engine: Evaluator,
    query: Any = None,
    *,
    batch_size: int = 2048,
    actuals: dict[Path, Actual] | None = None,
    order_pairs: bool = True,
) -> pa.Table:
    """Run ``plan`` on ``con`` (a DuckDB connection, or a SemConnection: its ``.duckdb``).

    ``actuals``, when given, is filled per operator path (child indices from the root) with
    what each operator did, for ``EXPLAIN ANALYZE SEMANTIC``. ``order_pairs``: a semantic
    join's pairs in the order of its template's first field (:mod:`.pair_order`).
    """
    raw: SqlConnection = getattr(con, "duckdb", con)
    root = plan.root if isinstance(plan, LogicalPlan) else plan
    run = _Run(raw, engine, query, batch_size, actuals, order_pairs=order_pairs)
    try:
        return run.sink(root)
    finally:
        drop_views(raw, run.registered)


def relational_sql(con: Any, node: Node) -> str:
    """The SQL of a relational subtree (scans, filters, joins), as the executor runs it: what
    the approximate plans sample before the run (``runtime.blocking``, ``runtime.cascade``).

    Example:
        >>> relational_sql(None, Scan("t", "t", ("id",)))  # doctest: +ELLIPSIS
        'SELECT ... FROM t...'
    """
    if any(n.semantic for n in node.walk()):
        raise ValueError(f"relational_sql: {node.label()} holds a semantic operator")
    return _Run(getattr(con, "duckdb", con), None, None, 2048, None).rel(node, ())  # type: ignore[arg-type]


def drop_views(con: SqlConnection, names: Sequence[str]) -> None:
    """Unregister a run's views; never let cleanup mask the error that ended the run.

    After a failure DuckDB may still hold the failed statement's open result, and then refuses
    ``unregister`` ("connection has an open result"); the names are unique, so a view left
    behind is harmless, while raising here would hide the real error (a backend failure, a
    cancellation).
    """
    for name in names:
        with contextlib.suppress(duckdb.Error):
            con.unregister(name)


class _Run:
    def __init__(
        self,
        con: SqlConnection,
        engine: Evaluator,
        query: Any,
        batch_size: int,
        actuals: dict[Path, Actual] | None,
        overrides: dict[int, str] | None = None,
        *,
        order_pairs: bool = True,
    ) -> None:
        self.con = con
        self.order_pairs = order_pairs
        # id(node) -> SQL that stands for it (the SEU loop's current batch, or its results)
        self.overrides = overrides or {}
        self.engine = engine
        self.query = query
        self.batch_size = batch_size
        self.actuals = actuals
        self.registered: list[str] = []

    # -- the sink: one SELECT, then sem_agg ---------------------------------------------------
    def sink(self, root: Node) -> pa.Table:
        aggs: list[tuple[SemAgg, Path]] = []
        node: Node = root
        path: Path = ()
        while isinstance(node, SemAgg):
            aggs.append((node, path))
            node, path = node.child, (*path, 0)
        parts: dict[type, Node] = {}
        top, top_path = node, path
        while isinstance(node, Limit | Sort | Project | Aggregate):
            parts[type(node)] = node
            node, path = node.children[0], (*path, 0)
        table = self.con.sql(self._select(self.rel(node, path), parts)).to_arrow_table()
        if parts:
            self._note(top_path, top, rows_out=table.num_rows)
        for agg, agg_path in reversed(aggs):
            table = self._sem_agg(agg, agg_path, table)
        return table

    def _select(self, source: str, parts: dict[type, Node]) -> str:
        return sink_select(source, parts)  # the SEU loop builds its streamed SELECT with this

    def _sem_agg(self, agg: SemAgg, path: Path, table: pa.Table) -> pa.Table:
        started = time.perf_counter()
        args = [table.column(name).combine_chunks() for name in agg.call.args]
        values = self._call(agg.call, args, agg.label())
        index = table.schema.get_field_index(agg.call.args[0])
        table = table.set_column(index, agg.output, values)
        for name in agg.call.args[1:]:
            table = table.remove_column(table.schema.get_field_index(name))
        self._note(path, agg, rows_in=len(values), rows_out=len(values), calls=len(values),
                   seconds=time.perf_counter() - started)  # fmt: skip
        return table

    # -- relational SQL ------------------------------------------------------------------------
    def rel(self, node: Node, path: Path) -> str:
        """SQL whose columns are the attributes of ``node``."""
        if id(node) in self.overrides:
            return self.overrides[id(node)]
        if isinstance(node, Scan):
            sql = scan_sql(node)
            self._count(path, node, sql)
            return sql
        if isinstance(node, Filter):
            sql = f"SELECT * FROM ({self.rel(node.child, (*path, 0))}) WHERE {node.predicate.sql}"
            self._count(path, node, sql)
            return sql
        if isinstance(node, Join):
            left, right = self.rel(node.left, (*path, 0)), self.rel(node.right, (*path, 1))
            sql = join_sql(left, right, node.condition.sql if node.condition else None)
            self._count(path, node, sql)
            return sql
        if isinstance(node, SemJoin):
            return self._sem_join(node, path)
        if isinstance(node, SemFilter | SemMap):
            return self._chain(node, path)
        raise TypeError(f"cannot execute {node.label()} inside the row-wise part of a plan")

    def _count(self, path: Path, node: Node, sql: str) -> None:
        if self.actuals is not None:
            ((rows,),) = self.con.sql(f"SELECT count(*) FROM ({sql})").fetchall()
            self._note(path, node, rows_out=int(rows))

    def _materialize(self, batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> str:
        table = pa.Table.from_batches(list(batches), schema=schema)
        name = f"__sem_plan_{next(_names)}"
        self.con.register(name, table)
        self.registered.append(name)
        return f"SELECT * FROM {quote(name)}"

    # -- semantic operators over batches -----------------------------------------------------
    def _chain(self, top: Node, path: Path) -> str:
        chain: list[tuple[Node, Path]] = []
        node = top
        while isinstance(node, SemFilter | SemMap):
            chain.append((node, path))
            node, path = node.child, (*path, 0)
        chain.reverse()
        reader = self.con.sql(self.rel(node, path)).to_arrow_reader(self.batch_size)
        schema = reader.schema
        try:
            for op, _ in chain:
                if isinstance(op, SemMap):
                    schema = schema.append(pa.field(op.output, _map_type(op.call)))
        except BaseException:
            reader.close()  # DuckDB refuses the ROLLBACK while this result is open
            raise

        def batches() -> Iterator[pa.RecordBatch]:
            with contextlib.closing(reader):  # a failed call leaves DuckDB no open result
                for batch in reader:
                    for op, op_path in chain:
                        batch = self._apply(op, op_path, batch)
                    yield batch

        return self._materialize(batches(), schema)

    def _apply(self, op: Node, path: Path, batch: pa.RecordBatch) -> pa.RecordBatch:
        started, sent = time.perf_counter(), self._sent()
        rows_in = batch.num_rows
        if isinstance(op, SemFilter):
            if rows_in:
                batch = batch.filter(pc.fill_null(self._decide(op, batch), False))
        elif isinstance(op, SemMap):
            values = (
                self._call(op.call, _args(batch, op.call), op.label())
                if rows_in
                else pa.array([], type=_map_type(op.call))
            )
            batch = batch.append_column(pa.field(op.output, values.type), values)
        self._note(path, op, rows_in=rows_in, rows_out=batch.num_rows, calls=rows_in,
                   seconds=time.perf_counter() - started, **self._sent(since=sent))  # fmt: skip
        return batch

    def _sem_join(self, node: SemJoin, path: Path) -> str:
        left, right = self.rel(node.left, (*path, 0)), self.rel(node.right, (*path, 1))
        reader: Any
        if node.blocking is not None:  # approximate: only the pairs similar enough
            table = blocked_pairs(self.con, node, left, right, self.engine, self.query)
            if self.order_pairs:
                table = order_pairs_table(table, node.call)
            reader = pa.RecordBatchReader.from_batches(
                table.schema, table.to_batches(max_chunksize=self.batch_size)
            )
        else:
            pairs = join_sql(left, right, node.condition.sql if node.condition else None)
            if self.order_pairs:
                pairs = order_pairs_sql(pairs, node.call)
            reader = self.con.sql(pairs).to_arrow_reader(self.batch_size)

        def batches() -> Iterator[pa.RecordBatch]:
            with contextlib.closing(reader):
                for batch in reader:
                    yield self._join_batch(node, path, batch)

        return self._materialize(batches(), reader.schema)

    def _join_batch(self, node: SemJoin, path: Path, batch: pa.RecordBatch) -> pa.RecordBatch:
        started, sent = time.perf_counter(), self._sent()
        rows_in = batch.num_rows
        if rows_in:
            batch = batch.filter(pc.fill_null(self._decide(node, batch), False))
        self._note(path, node, rows_in=rows_in, rows_out=batch.num_rows, calls=rows_in,
                   seconds=time.perf_counter() - started, **self._sent(since=sent))  # fmt: skip
        return batch

    def _sent(self, since: dict[str, int] | None = None) -> dict[str, int]:
        """The query's prompt tokens sent to a backend and those its cache held (``since``:
        the counts an operator's batch started from: what that batch added)."""
        counter = getattr(self.query, "counts", None) if self.actuals is not None else None
        counts = counter() if callable(counter) else {}
        now = {"sent_tokens": int(counts.get("physical_prompt_tokens", 0)),
               "cached_tokens": int(counts.get("physical_cached_tokens", 0))}  # fmt: skip
        return now if since is None else {k: v - since[k] for k, v in now.items()}

    def _decide(self, op: SemFilter | SemJoin, batch: pa.RecordBatch) -> pa.Array:
        """The predicate's answers for a batch: the LLM's, or (approximate) a cascade's, whose
        helper decides the rows it is sure of."""
        args = _args(batch, op.call)
        if op.cascade is not None:
            return run_cascade(op, args, lambda a: self._call(op.call, a, op.label()), self.query)
        return self._call(op.call, args, op.label())

    def _call(self, call: SemCall, args: Sequence[pa.Array], label: str) -> pa.Array:
        return self.engine.run_operator(
            call.kind, call.template, args, output_type=call.output_type, query=self.query,
            label=label, options=call.options, labels=call.labels,
        )  # fmt: skip

    def _note(self, path: Path, node: Node, **deltas: float) -> None:
        if self.actuals is None:
            return
        actual = self.actuals.setdefault(path, Actual())
        for key, value in deltas.items():
            setattr(actual, key, getattr(actual, key) + value)


def _args(batch: pa.RecordBatch, call: SemCall) -> list[pa.Array]:
    return [batch.column(batch.schema.get_field_index(a)) for a in call.args]


def _map_type(call: SemCall) -> pa.DataType:
    if call.kind in (OperatorKind.FILTER, OperatorKind.JOIN):  # a decision kept as a value
        return pa.bool_()
    return parse_type(call.output_type or "VARCHAR").arrow
