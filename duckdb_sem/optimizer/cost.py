"""The cost of a plan: LLM tokens, from per-operator selectivity and tokens per row.

Cost is counted in *token-equivalents*: prompt tokens plus ``completion_weight`` times
completion tokens (decoding a token costs several prefill tokens), summed over every LLM call
the plan makes; relational work costs ``relational_row_cost`` per row so that, between plans
with equal LLM work, the one moving fewer rows wins.

Measured :class:`Statistics` (filled by the estimator, keyed by :func:`operator_signature`)
override the documented :class:`CostDefaults`.

Example:
    >>> model = CostModel(table_rows={"reviews": 1000})
    >>> model.rank(sem_filter_node) < model.rank(sem_map_node)  # doctest: +SKIP
    True
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.plan.limits import driving_scan, split_sink, stop_rule
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
)

__all__ = [
    "DEFAULTS",
    "CostDefaults",
    "CostModel",
    "Estimate",
    "Path",
    "Statistics",
    "groups_key",
    "kept_key",
    "operator_signature",
    "scan_key",
]

Path = tuple[int, ...]


@dataclass(frozen=True)
class Statistics:
    """Measured behaviour of one semantic operator (what the estimator fills)."""

    selectivity: float
    prompt_tokens_per_row: float
    completion_tokens_per_row: float
    rows_measured: int = 0


@dataclass(frozen=True)
class CostDefaults:
    """What the cost model assumes before anything is measured (see docs/optimizer.md)."""

    table_rows: float = 1000.0  # a table DuckDB knows no size for
    relational_selectivity: float = 1 / 3  # each pushed-down relational predicate (System R)
    sem_filter_selectivity: float = 0.5  # no reason to favour yes or no
    instruction_tokens: float = 24.0  # the shared operator instruction
    tokens_per_arg: float = 48.0  # one rendered column value (a short text)
    completion_tokens: Mapping[str, float] = field(
        default_factory=lambda: {"BOOLEAN": 1.0, "VARCHAR": 24.0, "NUMBER": 3.0, "NESTED": 24.0}
    )
    agg_completion_tokens: float = 96.0
    group_fraction: float = 0.1  # groups per input row of a GROUP BY
    completion_weight: float = 4.0
    relational_row_cost: float = 1e-3


DEFAULTS = CostDefaults()


@dataclass(frozen=True)
class Estimate:
    """One operator's estimate: rows out, LLM calls and tokens, and its cost."""

    rows: float
    calls: float = 0.0
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0
    cost: float = 0.0


def scan_key(alias: str) -> str:
    """The ``table_rows`` key for one scan by its alias, which wins over its table's name:
    the SEU loop sets its batch's rows for the driving scan alone, also in a self-join (rows
    its predicates have passed already)."""
    return "@" + alias


def kept_key(alias: str) -> str:
    """The ``table_rows`` key of the rows a scan's pushed-down predicates leave of its table
    (counted or sampled before the query by :mod:`.cardinality`); without it each predicate
    keeps ``relational_selectivity`` of the rows."""
    return "=" + alias


def groups_key(key_sql: tuple[str, ...]) -> str:
    """The ``table_rows`` key of the distinct values of GROUP BY keys (``key + "@rows"``: the
    rows they were counted over), filled by :mod:`.cardinality`."""
    return "#" + "\x1f".join(key_sql)


def operator_signature(call: SemCall) -> str:
    """A stable key for a semantic operator: kind, template, arguments, output type, labels,
    and its options when it has any (another model or temperature answers, and costs,
    differently)."""
    parts = [call.kind.value, call.template, *call.args, call.output_type or "", *call.labels]
    if not call.options.is_default:
        parts.append(repr(call.options.key()))
    payload = "\x1f".join(parts)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


class CostModel:
    """Estimates rows, LLM calls, tokens and cost of every operator of a plan."""

    def __init__(
        self,
        *,
        table_rows: Mapping[str, float] | None = None,
        stats: Mapping[str, Statistics] | None = None,
        defaults: CostDefaults = DEFAULTS,
    ) -> None:
        self.table_rows = dict(table_rows or {})
        self.stats = dict(stats or {})
        self.defaults = defaults

    # -- per call ---------------------------------------------------------------------------
    def call_stats(self, call: SemCall) -> Statistics:
        measured = self.stats.get(operator_signature(call))
        if measured is not None:
            return measured
        d = self.defaults
        prompt = (
            d.instruction_tokens + len(call.template.split()) + d.tokens_per_arg * len(call.args)
        )
        if call.kind in (OperatorKind.FILTER, OperatorKind.JOIN):
            return Statistics(d.sem_filter_selectivity, prompt, d.completion_tokens["BOOLEAN"])
        if call.kind is OperatorKind.AGG:
            return Statistics(1.0, prompt, d.agg_completion_tokens)
        return Statistics(1.0, prompt, self.completion_tokens(call.output_type or "VARCHAR"))

    def completion_tokens(self, output_type: str | None) -> float:
        """The default completion tokens of one answer of ``output_type`` (None: a yes/no
        decision)."""
        upper = (output_type or "BOOLEAN").upper()
        table = self.defaults.completion_tokens
        if upper.startswith("ENUM("):  # one label, scored like a yes/no
            return table["BOOLEAN"]
        if "[" in upper or "STRUCT" in upper or upper == "JSON":
            return table["NESTED"]
        if upper in ("BOOLEAN", "BOOL"):
            return table["BOOLEAN"]
        if upper == "VARCHAR" or upper == "TEXT":
            return table["VARCHAR"]
        return table["NUMBER"]

    def request_cost(self, prompt_tokens: float, output_type: str | None) -> float:
        """Token-equivalents of one request with ``prompt_tokens`` (``output_type`` None: a
        yes/no decision): the unit of every remaining cost the scheduler compares."""
        completion = self.completion_tokens(output_type)
        return prompt_tokens + self.defaults.completion_weight * completion

    def row_cost(self, call: SemCall) -> float:
        s = self.call_stats(call)
        return (
            s.prompt_tokens_per_row + self.defaults.completion_weight * s.completion_tokens_per_row
        )

    def rank(self, op: Node) -> float:
        """Order of row-wise operators in a chain: cost per row over the fraction removed."""
        if isinstance(op, Filter):
            return 0.0
        if isinstance(op, SemFilter):
            s = self.call_stats(op.call)
            drop = 1.0 - s.selectivity
            return self.row_cost(op.call) / drop if drop > 0 else math.inf
        if isinstance(op, SemMap):
            return math.inf
        return 0.0

    # -- per plan ---------------------------------------------------------------------------
    def estimate(self, plan: Node) -> dict[Path, Estimate]:
        out: dict[Path, Estimate] = {}
        self._walk(plan, (), out)
        self._stop_early(plan, out)
        return out

    def _stop_early(self, plan: Node, out: dict[Path, Estimate]) -> None:
        """Scale what runs below a LIMIT the runtime stops at (``plan.limits.stop_rule``) to
        the share of the region's rows the LIMIT needs."""
        sink, region, path = split_sink(plan)
        if not sink or not isinstance(sink[0], Limit) or path not in out:
            return
        rule = stop_rule(sink, driving_scan(region, self._rows_by_table()))
        rows = out[path].rows
        if rule is None or rows <= rule.need:
            return
        share = rule.need / rows if rows > 0 else 1.0
        for at, e in list(out.items()):
            if len(at) > 0 and at[:1] == (0,):  # everything under the LIMIT
                out[at] = Estimate(e.rows * share, e.calls * share, e.prompt_tokens * share,
                                   e.completion_tokens * share, e.cost * share)  # fmt: skip

    def _rows_by_table(self) -> dict[str, float]:
        return {k: v for k, v in self.table_rows.items() if not k.startswith(("@", "=", "#"))}

    def cost(self, plan: Node) -> float:
        return sum(e.cost for e in self.estimate(plan).values())

    def _walk(self, node: Node, path: Path, out: dict[Path, Estimate]) -> tuple[float, float]:
        """Fill ``out``; return (estimated rows, rows without any filter) of ``node``."""
        kids = [self._walk(c, (*path, i), out) for i, c in enumerate(node.children)]
        d = self.defaults
        rel = d.relational_row_cost
        if isinstance(node, Scan):
            own = self.table_rows.get(scan_key(node.alias))
            if own is not None:  # a batch of the driving scan: its predicates applied
                rows = base = own
            else:
                base = self.table_rows.get(node.table, d.table_rows)
                kept = self.table_rows.get(kept_key(node.alias))  # counted before the query
                rows = (
                    base * d.relational_selectivity ** len(node.filters) if kept is None else kept
                )
            out[path] = Estimate(rows, cost=rel * base)
            return rows, base
        if isinstance(node, Join | SemJoin):
            (lrows, lbase), (rrows, rbase) = kids
            # A join condition is taken as many-to-one onto the smaller side (a foreign key).
            pairs = lrows * rrows
            if node.condition is not None:
                pairs /= max(min(lbase, rbase), 1.0)
            base = lbase * rbase / (max(min(lbase, rbase), 1.0) if node.condition else 1.0)
            if isinstance(node, Join):
                out[path] = Estimate(pairs, cost=rel * (lrows + rrows + pairs))
                return pairs, base
            s = self.stats.get(operator_signature(node.call))
            sel = s.selectivity if s else 1.0 / max(lbase, rbase, 1.0)
            # blocked (approximate): only the share of pairs above the threshold is asked,
            # and they hold (about) all the matches
            asked = pairs * node.blocking.fraction if node.blocking else pairs
            if node.call.options.per_row is not None:  # the rewrite asks rows, not pairs
                asked = min(asked, lrows + rrows)
            if node.cascade:  # and of those, only the pairs its helper leaves
                asked *= node.cascade.target_share
            out[path] = self._llm(node.call, asked, min(pairs * sel, asked))
            return min(pairs * sel, asked), base
        (rows_in, base), *_ = kids or [(0.0, 0.0)]
        if isinstance(node, Filter):
            rows = rows_in * d.relational_selectivity
            out[path] = Estimate(rows, cost=rel * rows_in)
        elif isinstance(node, SemFilter):
            rows = rows_in * self.call_stats(node.call).selectivity
            # cascaded (approximate): the target answers only the rows its helper leaves
            asked = rows_in * node.cascade.target_share if node.cascade else rows_in
            out[path] = self._llm(node.call, asked, rows)
        elif isinstance(node, SemMap):
            rows = rows_in
            out[path] = self._llm(node.call, rows_in, rows)
        elif isinstance(node, Aggregate):
            rows = self._groups(node, rows_in) if node.keys else 1.0
            out[path] = Estimate(rows, cost=rel * rows_in)
        elif isinstance(node, SemAgg):
            rows = rows_in
            out[path] = self._llm(node.call, rows_in, rows)
        elif isinstance(node, Limit):
            rows = rows_in if node.limit is None else min(rows_in, float(node.limit))
            out[path] = Estimate(rows)
        else:
            rows = rows_in * (0.5 if isinstance(node, Project) and node.distinct else 1.0)
            out[path] = Estimate(rows)
        return rows, base

    def _groups(self, node: Aggregate, rows_in: float) -> float:
        """GROUP BY's groups: from the distinct keys counted in the scan they read
        (``groups_key``), as many as a share ``rows_in / N`` of its N rows is expected to
        meet (D groups of N/D rows each); else ``group_fraction`` of the rows."""
        key = groups_key(node.key_sql)
        distinct, scanned = self.table_rows.get(key), self.table_rows.get(key + "@rows")
        if distinct is None or not scanned:
            return max(1.0, rows_in * self.defaults.group_fraction)
        share = min(1.0, rows_in / scanned)
        missed = math.pow(1.0 - share, scanned / max(distinct, 1.0))  # a group none of them hit
        return max(1.0, distinct * (1.0 - missed))

    def _llm(self, call: SemCall, calls: float, rows: float) -> Estimate:
        s = self.call_stats(call)
        prompt = calls * s.prompt_tokens_per_row
        completion = calls * s.completion_tokens_per_row
        cost = prompt + self.defaults.completion_weight * completion
        return Estimate(rows, calls, prompt, completion, cost)
