"""The two thresholds of a filter cascade, learned from rows the target model labelled.

A cascade scores every row with a cheap helper (a small model's calibrated log-odds, or an
embedding similarity) and lets the helper decide the rows it is sure of: a score at or above
``accept`` passes, one below ``reject`` fails, and the target model answers the rows between.
Relative to the target's own answers, only the helper's decisions can be wrong: a target
positive scored below ``reject`` is lost (recall), a target negative at or above ``accept`` is
let through (precision). :func:`learn_cascade` picks, on a labelled sample,

1. the highest ``reject`` that keeps at least ``recall`` of the sample's positives, then
2. the lowest ``accept`` (not under ``reject``) whose false passes keep the sample's precision
   (positives kept over positives kept plus negatives accepted) at least ``precision``,

so the band the target answers is as narrow as the targets allow (LOTUS's sem_filter cascade
learns its two thresholds the same way). The figures are *sample* estimates: a small sample can
miss, and the benchmark (``benchmarks/bench_cascade.py``) reports the true ones beside them.

Example (recall 0.75 may lose the positive at 0.3; precision 0.8 cannot let the negative at
0.8 through, so the target answers 0.8, 0.7 and 0.6):
    >>> learn_cascade([0.9, 0.8, 0.7, 0.6, 0.3, 0.2],
    ...               [True, False, True, True, True, False], precision=0.8, recall=0.75)
    CascadeThresholds(accept=0.9, reject=0.6, sample_precision=1.0, sample_recall=0.75, \
helper_share=0.5, positives=4, rows=6)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

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
) -> CascadeThresholds | None:
    """The widest helper decisions that meet both targets on the sample (see module); None
    when the sample holds no target positive (nothing to learn a recall from). A NULL label
    (the target gave no answer) counts as no match."""
    for name, target in (("precision", precision), ("recall", recall)):
        if not 0.0 < target <= 1.0:
            raise ValueError(f"{name} target must be in (0, 1], got {target}")
    if len(scores) != len(labels):
        raise ValueError(f"{len(scores)} scores but {len(labels)} labels")
    rows = [(float(s), bool(lab)) for s, lab in zip(scores, labels, strict=True)]
    positives = sorted((s for s, lab in rows if lab), reverse=True)
    if not positives:
        return None
    # 1. reject: the score of the last positive that recall needs (ties kept together)
    need = max(1, math.ceil(recall * len(positives) - 1e-9))
    reject = positives[min(need, len(positives)) - 1]
    kept = sum(1 for s in positives if s >= reject)
    # 2. accept: the lowest candidate score >= reject whose false passes keep the precision
    accept = float("inf")
    for candidate in sorted({s for s, _ in rows if s >= reject}):
        false_passes = sum(1 for s, lab in rows if not lab and s >= candidate)
        if kept / (kept + false_passes) >= precision - 1e-12:
            accept = candidate
            break
    false_passes = sum(1 for s, lab in rows if not lab and s >= accept)
    decided = sum(1 for s, _ in rows if s >= accept or s < reject)
    return CascadeThresholds(
        accept=accept, reject=reject, sample_precision=kept / (kept + false_passes),
        sample_recall=kept / len(positives), helper_share=decided / len(rows),
        positives=len(positives), rows=len(rows),
    )  # fmt: skip
