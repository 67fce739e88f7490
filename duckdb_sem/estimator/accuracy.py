"""Estimation accuracy, measured as SeqoFlow does.

Per batch: estimated against actual cost; the share of batches estimated within 10% of actual;
the share of batches whose chosen plan was one of the two truly cheapest (needs the actual cost
of every candidate on that batch, which a benchmark computes in hindsight). Across concurrent
queries: the share of pairs the remaining-cost estimate orders as the actual remaining cost
does, and Spearman's rank correlation.

Example:
    >>> spearman_rho([1, 2, 3], [10, 20, 30])
    1.0
    >>> pair_order_accuracy([1, 2, 3], [3, 2, 1])
    0.0
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "AccuracyReport",
    "BatchRecord",
    "pair_order_accuracy",
    "ranks",
    "spearman_rho",
    "summarize",
]


@dataclass(frozen=True, slots=True)
class BatchRecord:
    """One SEU: its rows, the plan it ran, what was estimated and what it cost."""

    index: int
    rows: int
    plan: str
    estimated_cost: float
    actual_cost: float
    estimated_remaining: float  # the query's remaining cost before this SEU (incl. it)
    switched: bool = False
    estimator_seconds: float = 0.0
    seconds: float = 0.0  # LLM time of this SEU on the target (simulated clock if SIMULATED)
    rows_out: int = 0
    top2: bool | None = None  # chosen plan among the two truly cheapest (None: unknown)

    @property
    def relative_error(self) -> float:
        if self.actual_cost == 0:
            return 0.0 if self.estimated_cost == 0 else 1.0
        return abs(self.estimated_cost - self.actual_cost) / self.actual_cost


@dataclass(frozen=True, slots=True)
class AccuracyReport:
    batches: int
    within_10pct: float  # share of batches
    median_error: float
    top2: float | None  # share of batches with a top-2 plan (None: not measured)
    switches: int
    estimator_seconds: float
    seconds: float

    @property
    def overhead_share(self) -> float:
        total = self.seconds + self.estimator_seconds
        return self.estimator_seconds / total if total else 0.0

    def lines(self) -> list[str]:
        out = [
            f"SEUs: {self.batches} batches, {self.switches} plan switch(es)",
            f"estimates within 10% of actual: {self.within_10pct:.1%} of batches "
            f"(median error {self.median_error:.1%})",
        ]
        if self.top2 is not None:
            out.append(f"batches on one of the two cheapest plans: {self.top2:.1%}"
                       " (each batch re-costed with what it showed)")  # fmt: skip
        out.append(
            f"estimator LLM time {self.estimator_seconds:.3f}s of {self.seconds + self.estimator_seconds:.3f}s "
            f"({self.overhead_share:.1%})"
        )
        return out


def summarize(records: Sequence[BatchRecord]) -> AccuracyReport:
    costed = [r for r in records if r.rows > 0]
    errors = sorted(r.relative_error for r in costed)
    within = sum(1 for e in errors if e <= 0.10) / len(errors) if errors else 1.0
    median = errors[len(errors) // 2] if errors else 0.0
    known = [r.top2 for r in records if r.top2 is not None]
    return AccuracyReport(
        batches=len(records),
        within_10pct=within,
        median_error=median,
        top2=(sum(1 for t in known if t) / len(known)) if known else None,
        switches=sum(1 for r in records if r.switched),
        estimator_seconds=sum(r.estimator_seconds for r in records),
        seconds=sum(r.seconds for r in records),
    )


def ranks(values: Sequence[float]) -> list[float]:
    """Ranks from 1, ties sharing their average rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman_rho(estimated: Sequence[float], actual: Sequence[float]) -> float:
    """Pearson correlation of the ranks (1.0: same order)."""
    n = len(estimated)
    if n < 2:
        return 1.0
    a, b = ranks(estimated), ranks(actual)
    ma, mb = sum(a) / n, sum(b) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(a, b, strict=True))
    va = sum((x - ma) ** 2 for x in a)
    vb = sum((y - mb) ** 2 for y in b)
    return cov / (va * vb) ** 0.5 if va and vb else 0.0


def pair_order_accuracy(estimated: Sequence[float], actual: Sequence[float]) -> float:
    """Share of pairs with distinct actual values that ``estimated`` orders the same way."""
    good = total = 0
    n = len(estimated)
    for i in range(n):
        for j in range(i + 1, n):
            if actual[i] == actual[j]:
                continue
            total += 1
            if (estimated[i] - estimated[j]) * (actual[i] - actual[j]) > 0:
                good += 1
    return good / total if total else 1.0
