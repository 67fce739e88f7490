"""The two thresholds of a filter cascade, learned from rows the target model labelled.

A cascade scores every row with a cheap helper (a small model's calibrated log-odds, or an
embedding similarity) and lets the helper decide the rows it is sure of: a score at or above
``accept`` passes, one below ``reject`` fails, and the target model answers the rows between.
Relative to the target's own answers, only the helper's decisions can be wrong: a target
positive scored below ``reject`` is lost (recall), a target negative at or above ``accept`` is
let through (precision).

:func:`learn_cascade` learns against confidence bounds, not the sample's point estimates (which
land a run just under its targets about half the time). With ``delta = 1 - confidence``:

1. ``reject`` is the score of the k-th highest sampled positive, k the rank
   :func:`~duckdb_sem.estimator.bounds.recall_rank` gives for ``recall`` at ``delta/2``;
2. ``accept`` is the lowest sampled score (not under ``reject``) at which the precision lower
   bound ``TP_L / (TP_L + FP_U)`` still reaches ``precision``, where ``TP_L`` is the
   Clopper-Pearson lower bound of the positive rate (at ``delta/4``) times the recall bound of
   step 1, and ``FP_U`` the Clopper-Pearson upper bound (at ``delta/4``) of the rate of rows
   that are target negatives scoring at or above ``accept``.

What is guaranteed, for labelled rows drawn independently from the rows the cascade decides
(the reservoir and per-SEU samples of ``runtime.cascade``; drawing without replacement only
tightens it): with probability at least ``confidence``, the true recall of the helper's reject
rule among the target's positives is at least ``recall`` (exact and distribution-free: the
order-statistic argument of ``recall_rank``, for any helper score), and the true precision of
the cascade's answers is at least ``precision`` (the three bounds combined by a union bound;
the scan for ``accept`` costs no extra confidence because false passes only grow as ``accept``
falls, but the budget it scans against is itself estimated, so this half is checked over many
seeds by the tests rather than proven tight). Both are rates over the population, relative to
the target's answers, not the realised share on one finite run. Too few positives for the
confidence asked: the helper rejects nothing (``reject = -inf``); too few rows to bound false
passes: it accepts nothing (``accept = inf``), and the target answers more.
``confidence=None`` is the old point rule (targets met on the sample exactly), kept for
comparison in the tests and benchmarks.

Example (point rule; recall 0.75 may lose the positive at 0.3; precision 0.8 cannot let the
negative at 0.8 through, so the target answers 0.8, 0.7 and 0.6):
    >>> learn_cascade([0.9, 0.8, 0.7, 0.6, 0.3, 0.2],
    ...               [True, False, True, True, True, False], precision=0.8, recall=0.75,
    ...               confidence=None)  # doctest: +ELLIPSIS
    CascadeThresholds(accept=0.9, reject=0.6, sample_precision=1.0, sample_recall=0.75, \
helper_share=0.5, positives=4, rows=6, ...)
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

from duckdb_sem.estimator.bounds import lower_bound, recall_rank, upper_bound

__all__ = ["CascadeThresholds", "learn_cascade"]


@dataclass(frozen=True, slots=True)
class CascadeThresholds:
    accept: float  # helper score at or above which a row passes (inf: never)
    reject: float  # helper score below which a row fails (-inf: never)
    sample_precision: float  # of the cascade's answers on the sample, against the target's
    sample_recall: float
    helper_share: float  # share of the sample the helper decides alone
    positives: int  # target positives in the sample
    rows: int  # labelled rows
    confidence: float | None = None  # the bounds below hold together at least this often
    precision_bound: float | None = None  # lower confidence bounds of the true figures
    recall_bound: float | None = None  # (None: the point rule, no bound)

    def decide(self, score: float) -> bool | None:
        """The helper's decision for ``score``; None: ask the target."""
        if score >= self.accept:
            return True
        if score < self.reject:
            return False
        return None


def learn_cascade(
    scores: Sequence[float],
    labels: Sequence[bool | None],
    *,
    precision: float,
    recall: float,
    confidence: float | None = 0.9,
) -> CascadeThresholds | None:
    """The widest helper decisions whose bounds meet both targets at ``confidence`` (see
    module; None: the point rule); None when the sample holds no target positive (nothing to
    learn a recall from). A NULL label (the target gave no answer) counts as no match."""
    for name, target in (("precision", precision), ("recall", recall)):
        if not 0.0 < target <= 1.0:
            raise ValueError(f"{name} target must be in (0, 1], got {target}")
    if confidence is not None and not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if len(scores) != len(labels):
        raise ValueError(f"{len(scores)} scores but {len(labels)} labels")
    rows = [(float(s), bool(lab)) for s, lab in zip(scores, labels, strict=True)]
    positives = sorted((s for s, lab in rows if lab), reverse=True)
    if not positives:
        return None
    n, total = len(positives), len(rows)
    delta = None if confidence is None else 1.0 - confidence
    # 1. reject: the score of the last positive that recall needs (ties kept together)
    if delta is None:
        need: int | None = max(1, math.ceil(recall * n - 1e-9))
    else:
        need = recall_rank(n, recall, delta / 2)
    reject = -math.inf if need is None else positives[min(need, n) - 1]
    kept = sum(1 for s in positives if s >= reject)
    recall_bound = None
    if delta is not None:
        recall_bound = 1.0 if need is None else lower_bound(need, n, delta / 2)
        # true positives kept, as a share of all rows, on the recall bound's event
        kept_rate = lower_bound(n, total, delta / 4) * recall_bound

    negatives = sorted(s for s, lab in rows if not lab)

    def false_passes_at(candidate: float) -> int:  # negatives scoring >= candidate
        return len(negatives) - bisect.bisect_left(negatives, candidate)

    def allows(false: int) -> bool:  # may the helper let ``false`` negatives through?
        if delta is None:
            return kept / (kept + false) >= precision - 1e-12
        bound = upper_bound(false, total, delta / 4)
        return kept_rate > 0 and kept_rate / (kept_rate + bound) >= precision - 1e-12

    # 2. accept: the lowest candidate score >= reject whose false passes keep the precision;
    # false passes only grow as accept falls, so the most allowed is found by bisection
    most, low, high = -1, 0, len(negatives)
    while low <= high:
        mid = (low + high) // 2
        if allows(mid):
            most, low = mid, mid + 1
        else:
            high = mid - 1
    accept = next((c for c in sorted({s for s, _ in rows if s >= reject})
                   if false_passes_at(c) <= most), math.inf)  # fmt: skip
    false_passes = false_passes_at(accept)
    decided = sum(1 for s, _ in rows if s >= accept or s < reject)
    precision_bound = None
    if delta is not None:
        fp = 0.0 if accept == math.inf else upper_bound(false_passes, total, delta / 4)
        precision_bound = kept_rate / (kept_rate + fp) if kept_rate + fp > 0 else 0.0
    return CascadeThresholds(
        accept=accept, reject=reject, sample_precision=kept / (kept + false_passes),
        sample_recall=kept / n, helper_share=decided / total, positives=n, rows=total,
        confidence=confidence, precision_bound=precision_bound, recall_bound=recall_bound,
    )  # fmt: skip
