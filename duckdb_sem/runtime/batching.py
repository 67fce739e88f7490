"""How the SEU loop cuts its driving table into batches, and which sinks can stream.

The driving table is the region's largest scan (:func:`driving_scan`). DuckDB's reader hands
out record batches of its own size; :func:`rebatch` regroups them into exactly the rows each
SEU asks for, and :func:`adapt_rows` doubles the next SEU's rows while one takes under half of
``target_seu_seconds`` and halves them above twice that. A sink that is at most one plain
projection is applied per batch and its rows streamed (:func:`streamable`).

Example: a reader of batches of 3, 3 and 2 rows regrouped by ``take(4)`` twice gives 4 rows
(the first batch and one row of the second), then 4 (the rest), then ``None``.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from duckdb_sem.plan.limits import driving_scan
from duckdb_sem.plan.nodes import Limit, Node, Project
from duckdb_sem.runtime.progress import RuntimeOptions

__all__ = [
    "adapt_rows",
    "driving_scan",
    "empty_batch",
    "rebatch",
    "streamable",
    "streamed_projection",
]


def rebatch(reader: pa.RecordBatchReader) -> Callable[[int], pa.Table | None]:
    """A function ``take(n)``: the next ``n`` rows of ``reader`` as a table (None at the end)."""
    buffer: list[pa.RecordBatch] = []
    held = 0
    done = False

    def take(n: int) -> pa.Table | None:
        nonlocal held, done
        while held < n and not done:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                done = True
                break
            buffer.append(batch)
            held += batch.num_rows
        if held == 0:
            return None
        table = pa.Table.from_batches(list(buffer), schema=reader.schema)
        head, rest = table.slice(0, n), table.slice(n)
        buffer.clear()
        buffer.extend(rest.to_batches())
        held = rest.num_rows
        return head.combine_chunks()

    return take


def adapt_rows(size: int, seconds: float, options: RuntimeOptions) -> int:
    """The next SEU's rows after one of ``size`` rows took ``seconds``."""
    o = options
    if seconds < o.target_seu_seconds / 2:
        return min(o.max_batch_rows, size * 2)
    if seconds > o.target_seu_seconds * 2:
        return max(o.min_batch_rows, size // 2)
    return size


def streamed_projection(sink: list[Node]) -> Project | None:
    """The projection applied per SEU when ``sink`` streams: one plain projection, alone or
    under a LIMIT (which the SEU loop then applies itself)."""
    nodes = sink[1:] if sink and isinstance(sink[0], Limit) and sink[0].limit is not None else sink
    if len(nodes) == 1 and isinstance(nodes[0], Project) and not nodes[0].distinct:
        return nodes[0]
    return None


def streamable(sink: list[Node]) -> bool:
    """Whether ``sink`` (top down) runs per batch: none, or :func:`streamed_projection`'s."""
    return not sink or streamed_projection(sink) is not None


def empty_batch(schema: pa.Schema) -> pa.RecordBatch:
    """A batch of no rows: the result's schema, sent before its rows."""
    return pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in schema], schema=schema)
