"""When a planned query may stop early, and how many driving rows the next SEU should read.

A ``LIMIT k`` (with an optional ``OFFSET o``) needs only ``o + k`` rows out of the row-wise
region, so the SEU loop stops as soon as it has them: :func:`stop_rule` says whether the
query's sink allows it. It does when the sink is the LIMIT over a plain projection (rows
stream out and are counted), and when an ``ORDER BY`` sits between them whose keys read only
columns of the driving table: the driving scan is then read in that order, so once ``o + k``
rows are out no later batch can hold a row that sorts before them (each output row carries
its driving row's keys, also through joins). An aggregate, DISTINCT or ``sem_agg`` needs every
row, and so does an ORDER BY on anything else (a ``sem_map`` output, another table's column).

:func:`next_rows` sizes each SEU from the rows still needed and the rate at which the region
turns driving rows into output rows (estimated before the first SEU, observed after), with a
margin; it grows at most ``GROWTH`` times per SEU, so a rate overestimated from a small sample
costs a few small SEUs, not a table's worth of LLM calls.

Example: ``WHERE sem_filter(...) LIMIT 5`` at an estimated selectivity of 0.5 reads
``ceil(5 / 0.5 * 1.25) = 13`` rows in its first SEU, and stops there if 5 of them pass.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from duckdb_sem.optimizer.cost import CostModel, Statistics, operator_signature, scan_key
from duckdb_sem.plan.nodes import Limit, Node, Project, Scan, SemJoin, Sort

__all__ = ["GROWTH", "MARGIN", "StopRule", "next_rows", "region_rate", "stop_rule"]

#: read this much more than the rate says is needed (a batch's selectivity varies)
MARGIN = 1.25
#: an SEU of a LIMIT query reads at most this many times the rows of the one before
GROWTH = 4
#: what a semantic join with no measurement is assumed to keep, for sizing only: optimistic,
#: so the first SEU of a join under a LIMIT is small (a too-small SEU costs one more round)
JOIN_SIZING_SELECTIVITY = 0.5


@dataclass(frozen=True, slots=True)
class StopRule:
    """How a query with a LIMIT stops: after ``need`` region rows (``offset + limit``)."""

    need: int
    offset: int
    limit: int
    order: tuple[str, ...] = ()  # ORDER BY keys pushed into the driving scan
    streams: bool = True  # rows go out per SEU (no ORDER BY): the sink is cut in Python


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
        and all(_reads_only(key, driving.produces) for key in rest[0].keys)
    ):
        return StopRule(need, limit.offset, limit.limit, order=rest[0].keys, streams=False)
    return None


def _reads_only(key: str, attrs: frozenset[str]) -> bool:
    """Whether the ORDER BY key (SQL over quoted attributes) reads nothing but ``attrs``."""
    try:
        tree = sqlglot.parse_one(f"SELECT 1 ORDER BY {key}", read="duckdb")
    except sqlglot.errors.ParseError:
        return False
    order = tree.args.get("order")
    if order is None:
        return False
    columns = [c for c in order.find_all(exp.Column)]
    if any(isinstance(n, exp.Subquery | exp.Select) for n in order.walk() if n is not order):
        return False
    return bool(columns) and all(c.name in attrs and not c.table for c in columns)


def region_rate(
    region: Node, driving: Scan, table_rows: dict[str, float], stats: dict[str, Statistics]
) -> float:
    """Estimated output rows of ``region`` per row of the driving table."""
    sized = dict(stats)
    for node in region.walk():
        if isinstance(node, SemJoin):
            sig = operator_signature(node.call)
            if sig not in sized:
                sized[sig] = Statistics(JOIN_SIZING_SELECTIVITY, 0.0, 0.0)
            else:
                s = sized[sig]
                sized[sig] = dataclasses.replace(
                    s, selectivity=max(s.selectivity, JOIN_SIZING_SELECTIVITY)
                )
    rows = dict(table_rows)
    rows[scan_key(driving.alias)] = 1.0
    model = CostModel(table_rows=rows, stats=sized)
    return max(model.estimate(region)[()].rows, 0.0)


def next_rows(
    need_left: int,
    rate: float,
    *,
    previous: int | None,
    first_max: int,
    ceiling: int,
) -> int:
    """Driving rows for the next SEU of a query that still needs ``need_left`` output rows.

    ``rate`` is output rows per driving row (0 when nothing came out yet); ``previous`` the
    last SEU's rows (None before the first, which reads at most ``first_max``).
    """
    if need_left <= 0:
        return 0
    cap = first_max if previous is None else min(ceiling, max(1, previous) * GROWTH)
    if rate <= 0:
        want = first_max if previous is None else max(1, previous) * 2
    else:
        want = math.ceil(need_left / rate * MARGIN)
    return max(1, min(cap, want))
