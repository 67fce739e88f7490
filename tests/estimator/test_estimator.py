"""The estimator: stats store, refinement, sampling profiler, remaining cost, accuracy metrics."""

from __future__ import annotations

import duckdb
import pytest

from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.estimator import (
    BatchRecord,
    Observation,
    Profiler,
    StatsStore,
    pair_order_accuracy,
    plan_cost,
    remaining_cost,
    spearman_rho,
    summarize,
)
from duckdb_sem.estimator.accuracy import ranks
from duckdb_sem.estimator.refine import Refiner
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.optimizer.cost import Statistics, operator_signature
from duckdb_sem.plan.nodes import Scan, SemCall, SemFilter, SemMap

GOOD = SemCall("{0} is fine", ("r.text",))
TOPIC = SemCall("{0} topic", ("r.text",), OperatorKind.MAP, "VARCHAR")


def test_store_discounts_old_evidence() -> None:
    store = StatsStore(decay=0.5)
    store.update("s", rows=100, selectivity=0.9, prompt_tokens=10, completion_tokens=1)
    store.update("s", rows=100, selectivity=0.1, prompt_tokens=30, completion_tokens=1)
    got = store.get("s")
    assert got is not None
    assert got.selectivity == pytest.approx((0.9 * 50 + 0.1 * 100) / 150)
    assert got.rows_measured == 200
    assert store.snapshot()["s"].prompt_tokens_per_row == pytest.approx((10 * 50 + 30 * 100) / 150)


def test_refiner_blends_the_batch_sample_with_the_past_and_learns_prompt_bias() -> None:
    refiner = Refiner(StatsStore(), prior_weight=4.0)
    refiner.observe(
        Observation("s", rows_in=100, rows_out=90, prompt_tokens=1200, completion_tokens=100)
    )
    sample = Statistics(0.0, 10.0, 1.0, rows_measured=8)
    est = refiner.estimate("s", sample)
    assert est is not None and est.selectivity == pytest.approx(0.9 * 4 / 12)
    # the target reported 12 tokens a row where 10 were counted: the next estimate corrects
    refiner.observe(
        Observation("s", rows_in=10, rows_out=0, prompt_tokens=120, completion_tokens=10)
    )
    again = refiner.estimate("s", sample)
    assert again is not None and again.prompt_tokens_per_row > 10.5


def test_refiner_learns_the_targets_per_request_tokens_as_an_offset_not_a_ratio() -> None:
    # the target adds 12 tokens to every request (its chat template), whatever the row's length:
    # after batches of short rows, a batch of long rows is estimated exactly (a ratio learned
    # on the short rows, 52/40, would overestimate it by 25 tokens a row)
    refiner = Refiner(StatsStore())
    for _ in range(3):
        refiner.estimate("s", Statistics(0.5, 40.0, 1.0, rows_measured=0))
        refiner.observe(Observation("s", rows_in=100, rows_out=50, prompt_tokens=5200,
                                    completion_tokens=100))  # fmt: skip
    long = refiner.estimate("s", Statistics(0.5, 120.0, 1.0, rows_measured=0))
    assert long is not None and long.prompt_tokens_per_row == pytest.approx(132.0)
    assert refiner.overhead("s") == pytest.approx(12.0)
    assert refiner.overhead("unseen") == 0.0


def test_refiner_calibrates_a_biased_small_model_against_the_target() -> None:
    # the small model says yes 25 points more often than the target on every operator; once a
    # few sampled batches ran, a new regime's sample is read through that bias
    refiner = Refiner(StatsStore())
    for i, (truth, tokens) in enumerate([(0.1, 10.0), (0.3, 20.0), (0.5, 30.0), (0.7, 40.0)]):
        sig = f"op{i}"
        refiner.estimate(sig, Statistics(truth + 0.25, tokens, 1.0, rows_measured=16))
        refiner.observe(Observation(sig, rows_in=200, rows_out=int(200 * truth),
                                    prompt_tokens=200 * tokens, completion_tokens=200))  # fmt: skip
    assert refiner.calibration(0.35) == pytest.approx(0.1, abs=0.03)
    # a batch unlike the regime seen (4x the tokens): the calibrated sample stands alone
    est = refiner.estimate("op0", Statistics(0.95, 40.0, 1.0, rows_measured=16))
    assert est is not None and est.selectivity == pytest.approx(0.7, abs=0.04)
    # a map passes every row on both models: it says nothing about the bias
    fresh = Refiner(StatsStore())
    fresh.estimate("map", Statistics(1.0, 10.0, 5.0, rows_measured=16))
    fresh.observe(Observation("map", rows_in=100, rows_out=100, prompt_tokens=1000,
                              completion_tokens=500))  # fmt: skip
    assert fresh.calibration.w == 0 and fresh.calibration(0.4) == 0.4


def test_profiler_measures_on_the_estimator_and_counts_target_tokens() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE r AS SELECT i AS id, CASE WHEN i % 4 = 0 THEN 'fine film' "
                "ELSE 'poor film here' END AS text FROM range(400) t(i)")  # fmt: skip
    target = RuleBackend()
    plan = SemMap(SemFilter(Scan("r", "r", ("id", "text")), GOOD), TOPIC, "topic")
    profiler = Profiler(target, RuleBackend(yes_if=["fine film"]), sample_rows=40)
    result = profiler.profile_plan(con, plan)
    good = result.stats[operator_signature(GOOD)]
    assert 0.1 < good.selectivity < 0.45  # truth 0.25, from 40 sampled rows
    assert good.rows_measured == 40 and result.calls == 80
    topic = result.stats[operator_signature(TOPIC)]
    assert topic.completion_tokens_per_row >= 2 and topic.selectivity == 1.0
    # prompt tokens are the target's count of the rendered rows plus the instruction
    assert 20 < good.prompt_tokens_per_row < 40
    # without an estimator nothing is asked, but prompt tokens are still counted
    quiet = Profiler(target, None, sample_rows=40).profile_plan(con, plan)
    assert quiet.calls == 0 and quiet.stats[operator_signature(GOOD)].selectivity == 0.5


def test_statistics_reach_every_plan_and_remaining_cost_scales_with_rows() -> None:
    scan = Scan("r", "r", ("id", "text"))
    other = SemCall("{0} is long", ("r.text",))
    a = SemFilter(SemFilter(scan, GOOD), other)
    b = SemFilter(SemFilter(scan, other), GOOD)
    stats = {operator_signature(GOOD): Statistics(0.1, 10, 1),
             operator_signature(other): Statistics(0.9, 10, 1)}  # fmt: skip
    rows = {"r": 100.0}
    assert plan_cost(a, stats, table_rows=rows) < plan_cost(b, stats, table_rows=rows)
    full = remaining_cost(a, stats, table_rows=rows, driving_table="r", rows_left=100)
    half = remaining_cost(a, stats, table_rows=rows, driving_table="r", rows_left=50)
    assert full == pytest.approx(2 * half)
    assert remaining_cost(a, stats, table_rows=rows, driving_table="r", rows_left=0) == 0


def test_accuracy_metrics() -> None:
    assert spearman_rho([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman_rho([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert ranks([5, 1, 5]) == [2.5, 1.0, 2.5]
    assert pair_order_accuracy([1, 2, 3], [1, 3, 2]) == pytest.approx(2 / 3)
    records = [
        BatchRecord(0, 10, "p", 100, 105, 300, top2=True, seconds=1.0, estimator_seconds=0.1),
        BatchRecord(1, 10, "q", 100, 150, 200, switched=True, top2=False, seconds=1.0),
    ]
    report = summarize(records)
    assert report.within_10pct == 0.5 and report.top2 == 0.5 and report.switches == 1
    assert report.overhead_share == pytest.approx(0.1 / 2.1)
    assert any("within 10%" in line for line in report.lines())


def test_explain_analyze_semantic_reports_estimation(con) -> None:  # type: ignore[no-untyped-def]
    text = "\n".join(r[0] for r in con.sql(
        "EXPLAIN ANALYZE SEMANTIC SELECT id FROM reviews WHERE sem_filter('{text} is good')"
    ).fetchall())  # fmt: skip
    assert "actual rows=" in text
    assert "SEUs: 1 batches" in text and "within 10% of actual" in text
    assert "estimator LLM time" in text


def test_refiner_uses_observed_regimes_and_samples_only_when_in_doubt() -> None:
    refiner = Refiner(StatsStore())
    short, long = Statistics(0.5, 10.0, 1.0, rows_measured=0), Statistics(0.5, 40.0, 1.0, 0)
    assert refiner.needs_sample("s", 10.0)  # nothing observed yet
    refiner.estimate("s", Statistics(0.2, 10.0, 1.0, rows_measured=16))
    refiner.observe(Observation("s", rows_in=100, rows_out=10, prompt_tokens=1000,
                                completion_tokens=100))  # fmt: skip
    refiner.estimate("s", Statistics(0.8, 40.0, 1.0, rows_measured=16))
    refiner.observe(Observation("s", rows_in=100, rows_out=90, prompt_tokens=4000,
                                completion_tokens=100))  # fmt: skip
    # each token profile now identifies one regime: no sample, the observed outcome is used
    assert not refiner.needs_sample("s", 10.5) and not refiner.needs_sample("s", 39.0)
    est_short, est_long = refiner.estimate("s", short), refiner.estimate("s", long)
    assert est_short is not None and est_short.selectivity == pytest.approx(11 / 102)
    assert est_long is not None and est_long.selectivity == pytest.approx(91 / 102)
    refiner.observe(Observation("s", rows_in=100, rows_out=90, prompt_tokens=4000,
                                completion_tokens=100))  # fmt: skip
    # the short regime drifted (90% where 11% was expected): sample before trusting it again
    refiner.estimate("s", short)
    refiner.observe(Observation("s", rows_in=100, rows_out=90, prompt_tokens=1000,
                                completion_tokens=100))  # fmt: skip
    assert refiner.needs_sample("s", 10.0)
    picked = refiner.estimate("s", Statistics(0.85, 10.0, 1.0, rows_measured=16))
    assert picked is not None and picked.selectivity > 0.8
