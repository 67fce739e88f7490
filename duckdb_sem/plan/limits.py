"""Which LIMITs let a query stop early: a property of the plan's sink and its driving scan.

A ``LIMIT k`` (with an optional ``OFFSET o``) needs only ``o + k`` rows out of the row-wise
region. :func:`stop_rule` says whether the sink allows stopping there. It does when the sink is
the LIMIT over a plain projection (rows stream out and are counted), and when an ``ORDER BY``
sits between them whose keys read only columns of the driving scan: the driving scan is then
read in that order, so once ``o + k`` rows are out no later batch can hold a row that sorts
before them (each output row carries its driving row's keys, also through joins). An
aggregate, DISTINCT or ``sem_agg`` needs every row, and so does an ORDER BY on anything else
(a ``sem_map`` output, another table's column). The driving scan is the region's scan of the
most rows (:func:`driving_scan`); the SEU loop cuts it into batches.

Example: the sink ``Limit 5 / Project id`` over any region stops after 5 rows; ``Limit 5 /
Sort "r.id" / Project`` stops after 5 rows when ``r`` is the driving scan.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from duckdb_sem.plan.nodes import Aggregate, Limit, Node, Project, Scan, SemAgg, Sort

__all__ = ["StopRule", "driving_scan", "split_sink", "stop_rule"]


def split_sink(root: Node) -> tuple[list[Node], Node, tuple[int, ...]]:
    """The set-wise sink above the row-wise region: (sink nodes top down, region, its path)."""
    sink: list[Node] = []
    node: Node = root
    path: tuple[int, ...] = ()
    while isinstance(node, SemAgg | Limit | Sort | Project | Aggregate):
        sink.append(node)
        node, path = node.children[0], (*path, 0)
    return sink, node, path


def driving_scan(region: Node, table_rows: Mapping[str, float]) -> Scan:
    """The scan of the most rows (the first of them on a tie): the one the SEUs batch."""
    scans = [n for n in region.walk() if isinstance(n, Scan)]
    return max(scans, key=lambda s: (table_rows.get(s.table, 1000.0), -scans.index(s)))


@dataclass(frozen=True, slots=True)
class StopRule:
    """How a query with a LIMIT stops: after ``need`` region rows (``offset + limit``)."""

    need: int
    offset: int
    limit: int
    order: tuple[str, ...] = ()  # ORDER BY keys pushed into the driving scan (none: rows
    # stream out per SEU and the loop cuts them to OFFSET/LIMIT itself)


def stop_rule(sink: list[Node], driving: Scan) -> StopRule | None:
    """The stop rule for ``sink`` (top down) over ``driving``, or None when every row counts."""
    if not sink or not isinstance(sink[0], Limit) or sink[0].limit is None:
        return None
    limit = sink[0]
    assert limit.limit is not None
    rest = sink[1:]
    need = limit.offset + limit.limit
    if all(isinstance(n, Project) and not n.distinct for n in rest) and len(rest) <= 1:
        return StopRule(need, limit.offset, limit.limit)
    if (
        len(rest) == 2
        and isinstance(rest[0], Sort)
        and isinstance(rest[1], Project)
        and not rest[1].distinct
        and len(rest[0].key_reads) == len(rest[0].keys)
        and all(r is not None and r <= driving.produces for r in rest[0].key_reads)
    ):
        return StopRule(need, limit.offset, limit.limit, order=rest[0].key_sql)
    return None
