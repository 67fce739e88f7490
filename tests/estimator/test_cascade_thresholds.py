"""Learning a filter cascade's thresholds: against confidence bounds the true precision and
recall meet the targets at the stated rate (the point rule does not); the point rule meets them
on the sample with the narrowest band; the thresholds follow drift."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from duckdb_sem.estimator.cascade_thresholds import learn_cascade
from duckdb_sem.optimizer.cost import operator_signature
from duckdb_sem.plan.nodes import Scan, SemCall, SemFilter
from duckdb_sem.runtime.approximation import Approximation
from duckdb_sem.runtime.cascade import Cascades, Learner, run_cascade
from duckdb_sem.runtime.context import QueryContext


def _measured(
    scores: list[float], labels: list[bool], accept: float, reject: float
) -> tuple[float, float]:
    kept = sum(1 for s, y in zip(scores, labels, strict=True) if y and s >= reject)
    false = sum(1 for s, y in zip(scores, labels, strict=True) if not y and s >= accept)
    return kept / (kept + false), kept / sum(labels)


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize(("precision", "recall"), [(0.9, 0.9), (0.8, 0.95), (0.99, 0.7)])
def test_learned_thresholds_meet_both_targets_on_the_sample(seed: int, precision: float,
                                                            recall: float) -> None:  # fmt: skip
    rng = np.random.default_rng(seed)
    labels = [bool(x) for x in rng.random(200) < 0.4]
    scores = [float(rng.normal(1.0 if y else -1.0, 1.0)) for y in labels]
    learned = learn_cascade(scores, labels, precision=precision, recall=recall, confidence=None)
    assert learned is not None and learned.reject <= learned.accept
    p, r = _measured(scores, labels, learned.accept, learned.reject)
    assert p >= precision and r >= recall
    assert (learned.sample_precision, learned.sample_recall) == pytest.approx((p, r))
    # the reject threshold is as high as recall allows: the next positive up would miss it
    higher = sorted(s for s, y in zip(scores, labels, strict=True) if y and s > learned.reject)
    if higher:
        assert _measured(scores, labels, learned.accept, higher[0])[1] < recall


def _tail(x: float) -> float:
    return 0.5 * math.erfc(x / math.sqrt(2))


def _true_rates(accept: float, reject: float, prevalence: float) -> tuple[float, float]:
    """Precision and recall over the population: positives score N(1, 1), negatives N(-1, 1)."""
    recall = _tail(reject - 1.0) if reject > -math.inf else 1.0
    false = _tail(accept + 1.0) if accept < math.inf else 0.0
    kept = prevalence * recall
    return kept / (kept + (1 - prevalence) * false), recall


@pytest.mark.parametrize(("rows", "confidence"), [(300, 0.9), (1000, 0.8)])
def test_bounds_meet_the_targets_at_the_stated_rate_and_the_point_rule_does_not(
    rows: int, confidence: float
) -> None:
    met = {confidence: 0, None: 0}
    shares: list[float] = []
    for seed in range(200):
        rng = np.random.default_rng(seed)
        labels = rng.random(rows) < 0.4
        scores = rng.normal(np.where(labels, 1.0, -1.0), 1.0)
        for rule in met:
            learned = learn_cascade(scores.tolist(), labels.tolist(), precision=0.9, recall=0.9,
                                    confidence=rule)  # fmt: skip
            assert learned is not None
            p, r = _true_rates(learned.accept, learned.reject, 0.4)
            met[rule] += p >= 0.9 and r >= 0.9
            if rule is not None:
                shares.append(learned.helper_share)
                assert learned.confidence == confidence
                assert learned.recall_bound is not None and learned.recall_bound >= 0.9
                assert learned.precision_bound is not None and learned.precision_bound >= 0.9
    assert met[confidence] >= confidence * 200  # the stated guarantee, over 200 samples
    assert met[None] < 0.5 * 200  # the point rule lands under a target about half the time
    assert np.mean(shares) > 0.3  # and the bounded helper still decides a good share


def test_too_few_positives_for_the_confidence_leaves_the_rows_to_the_target() -> None:
    labels = [True, True, False, False, False]
    learned = learn_cascade([0.9, 0.8, 0.2, 0.1, 0.0], labels, precision=0.9, recall=0.9,
                            confidence=0.9)  # fmt: skip
    assert learned is not None
    assert learned.reject == -math.inf and learned.accept == math.inf  # decides nothing
    assert learned.helper_share == 0.0 and learned.recall_bound == 1.0
    point = learn_cascade([0.9, 0.8, 0.2, 0.1, 0.0], labels, precision=0.9, recall=0.9,
                          confidence=None)  # fmt: skip
    assert point is not None and point.helper_share > 0.5  # the point rule trusts 5 rows


def test_a_perfect_helper_decides_everything_and_a_useless_one_nothing() -> None:
    labels = [i % 2 == 0 for i in range(100)]
    perfect = learn_cascade([1.0 if y else 0.0 for y in labels], labels, precision=0.9, recall=0.9,
                            confidence=None)  # fmt: skip
    assert perfect is not None and perfect.helper_share == 1.0
    assert perfect.decide(1.0) is True and perfect.decide(0.0) is False
    useless = learn_cascade([0.5] * 100, labels, precision=0.9, recall=0.9)
    assert useless is not None and useless.helper_share == 0.0  # every row goes to the target
    assert useless.decide(0.5) is None


def test_no_positive_nothing_to_learn_and_bad_targets() -> None:
    assert learn_cascade([0.1, 0.2], [False, None], precision=0.9, recall=0.9) is None
    with pytest.raises(ValueError, match="confidence must be in"):
        learn_cascade([0.1], [True], precision=0.9, recall=0.9, confidence=1.0)
    with pytest.raises(ValueError, match="precision target"):
        learn_cascade([0.1], [True], precision=0.0, recall=0.9)
    with pytest.raises(ValueError, match="2 scores but 1 labels"):
        learn_cascade([0.1, 0.2], [True], precision=0.9, recall=0.9)


class _ColumnHelper:
    """TEST DOUBLE helper: a row's score is the number after '|' in its text."""

    name = "column-double"

    def scores(
        self, template: str, args: list[pa.Array], query: QueryContext, *, sides: object = None
    ) -> list[float | None]:
        return [float(str(v).split("|")[1]) for v in args[0].to_pylist()]


def test_thresholds_are_relearned_every_seu_and_follow_drift() -> None:
    call = SemCall("{0} is yes", ("t.txt",))
    node = SemFilter(Scan("t", "t", ("txt",)), call)
    approx = Approximation(allowed=True, window=200, seu_sample=0.5)
    first = learn_cascade([0.9, 0.8, 0.2, 0.1], [True, True, False, False], precision=0.9,
                          recall=0.9, confidence=None)  # fmt: skip
    assert first is not None
    learner = Learner(_ColumnHelper(), approx, first)
    query = QueryContext()
    query.cascades = Cascades()
    query.cascades.learners[operator_signature(call)] = learner
    asked: list[int] = []

    def target(args: list[pa.Array]) -> pa.Array:  # the truth: the label before '|'
        asked.append(len(args[0]))
        return pa.array([str(v).startswith("y") for v in args[0].to_pylist()])

    def batch(shift: float) -> pa.Array:
        return pa.array([f"{'y' if i % 2 else 'n'}|{(0.8 if i % 2 else 0.2) - shift + i / 1e4}"
                         for i in range(400)])  # fmt: skip

    truth = [i % 2 == 1 for i in range(400)]

    def precision_recall(got: list[bool]) -> tuple[float, float]:
        hits = sum(g and t for g, t in zip(got, truth, strict=True))
        return hits / max(1, sum(got)), hits / sum(truth)

    p, r = precision_recall(run_cascade(node, [batch(0.0)], target, query).to_pylist())
    assert p >= 0.9 and r >= 0.9
    assert sum(asked) < 400  # the helper decided some rows, on 200 labelled ones at 90%
    before = learner.thresholds
    for _ in range(4):  # the helper's scores drift down by 0.5: positives now near 0.3
        run_cascade(node, [batch(0.5)], target, query)
    assert len(learner.history) == 5 and learner.seus == 5
    assert learner.thresholds.reject < before.reject  # re-learned on the drifted rows
    p, r = precision_recall(run_cascade(node, [batch(0.5)], target, query).to_pylist())
    assert p >= 0.9 and r >= 0.9
    assert query.stats().cascade_helper_rows > 0
