"""One SEU's work in DuckDB: its batch registered as a view that stands in for a scan.

Each SEU registers its batch of the driving table as an Arrow view (``__sem_seu_N``) and runs
the plan's row-wise region with that view in place of the driving scan (``_Run.overrides``);
a streamable sink (one projection) is applied in the same SELECT (:func:`run_region`). A sink
that cannot stream runs once at the end, over the region's kept output rows registered the
same way in place of the whole region (:func:`run_sink`). The views, and every view the run
registered, are dropped afterwards, also when the run fails.

Example: region ``SemFilter(Scan reviews AS r)`` on a batch registered as ``__sem_seu_7``
reads ``SELECT * FROM "__sem_seu_7"`` where it would read the scan's SELECT.
"""

from __future__ import annotations

import itertools
from typing import Any

import pyarrow as pa
from sqlglot import exp

from duckdb_sem.plan.nodes import Node, Project, Scan, SemFilter, SemMap, quote
from duckdb_sem.runtime.execute_plan import Actual, Evaluator, Path, _Run, drop_views

__all__ = ["run_region", "run_sink"]

_views = itertools.count()


def run_region(
    con: Any,
    engine: Evaluator,
    query: Any,
    *,
    region: Node,
    path: Path,
    project: Project | None,
    driving_alias: str,
    batch: pa.Table,
    actuals: dict[Path, Actual] | None,
    order_pairs: bool = True,
) -> pa.Table:
    """``region`` (at ``path`` in its plan) over ``batch`` of the driving scan, with the sink's
    ``project`` applied when the sink streams; otherwise the region's rows, columns in name
    order. ``order_pairs``: semantic joins ask their pairs by first field (``pair_order``)."""
    scan = next(n for n in region.walk() if isinstance(n, Scan) and n.alias == driving_alias)
    chain = _semantic_chain(region, path, scan)
    columns = _plain_columns(project) if project is not None else []
    if chain is not None and columns is not None:
        return _in_arrow(con, engine, query, chain, columns, batch, actuals)
    view = f"__sem_seu_{next(_views)}"
    con.register(view, batch)
    run = _Run(con, engine, query, max(batch.num_rows, 1), actuals,
               {id(scan): f"SELECT * FROM {quote(view)}"}, order_pairs=order_pairs)  # fmt: skip
    try:
        sql = run.rel(region, path)
        if project is not None:
            sql = run._select(sql, {Project: project})
        table: pa.Table = con.sql(sql).to_arrow_table()
    finally:
        drop_views(con, [view, *run.registered])
    if project is None:
        table = table.select(sorted(table.schema.names))
    return table


def _semantic_chain(region: Node, path: Path, scan: Scan) -> list[tuple[Node, Path]] | None:
    """The region's operators bottom up, when it is only ``sem_filter`` s and ``sem_map`` s
    over the driving scan (then the SEU needs no DuckDB query); else None."""
    chain: list[tuple[Node, Path]] = []
    node = region
    while isinstance(node, SemFilter | SemMap):
        chain.append((node, path))
        node, path = node.child, (*path, 0)
    return list(reversed(chain)) if node is scan else None


def _plain_columns(project: Project) -> list[tuple[str, str]] | None:
    """(attribute, name) of each item when the projection only picks and renames columns."""
    if project.distinct:
        return None
    out = []
    for item in project.items:
        expr = item.expr
        if not isinstance(expr, exp.Column) or expr.table or len(item.reads) != 1:
            return None
        (attr,) = item.reads
        if expr.name != attr:
            return None
        out.append((attr, item.name))
    return out


def _in_arrow(
    con: Any,
    engine: Evaluator,
    query: Any,
    chain: list[tuple[Node, Path]],
    columns: list[tuple[str, str]],
    batch: pa.Table,
    actuals: dict[Path, Actual] | None,
) -> pa.Table:
    """One SEU of a region that is a chain of semantic operators over the driving scan, in
    Arrow: each operator over the batch in turn, then the projection's columns picked."""
    run = _Run(con, engine, query, max(batch.num_rows, 1), actuals)
    table = batch.combine_chunks()
    rows = table.to_batches()
    current = rows[0] if rows else pa.RecordBatch.from_pylist([], schema=table.schema)
    for op, op_path in chain:
        current = run._apply(op, op_path, current)
    out = pa.Table.from_batches([current])
    if not columns:  # no projection: the region's rows, columns in name order
        return out.select(sorted(out.schema.names))
    picked = out.select([attr for attr, _ in columns])
    return picked.rename_columns([name for _, name in columns])


def run_sink(
    con: Any,
    engine: Evaluator,
    query: Any,
    *,
    root: Node,
    region: Node,
    kept: list[pa.Table],
    actuals: dict[Path, Actual] | None,
) -> pa.Table:
    """The sink of plan ``root`` over the ``kept`` output rows of its ``region``."""
    view = f"__sem_seu_{next(_views)}"
    rows = pa.concat_tables(kept) if kept else pa.table({})
    con.register(view, rows)
    run = _Run(con, engine, query, 2048, actuals,
               {id(region): f"SELECT * FROM {quote(view)}"})  # fmt: skip
    try:
        return run.sink(root)
    finally:
        drop_views(con, [view, *run.registered])
