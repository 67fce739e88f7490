"""When a planned query may stop early, and how many driving rows the next SEU should read.

A ``LIMIT k`` (with an optional ``OFFSET o``) needs only ``o + k`` rows out of the row-wise
region, so the SEU loop stops as soon as it has them; whether the query's sink allows that is
:func:`duckdb_sem.plan.limits.stop_rule` (re-exported here), which the cost model also uses to
cost the LIMIT.

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

from duckdb_sem.optimizer.cost import CostModel, Statistics, operator_signature, scan_key
from duckdb_sem.plan.limits import StopRule, stop_rule
from duckdb_sem.plan.nodes import Node, Scan, SemJoin

__all__ = ["GROWTH", "MARGIN", "StopRule", "next_rows", "region_rate", "stop_rule"]

#: read this much more than the rate says is needed (a batch's selectivity varies)
MARGIN = 1.25
#: an SEU of a LIMIT query reads at most this many times the rows of the one before
GROWTH = 4
#: what a semantic join with no measurement is assumed to keep, for sizing only: optimistic,
#: so the first SEU of a join under a LIMIT is small (a too-small SEU costs one more round)
JOIN_SIZING_SELECTIVITY = 0.5


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
