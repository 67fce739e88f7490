"""The embedded model's throughput: measured as it answers, the reference until then."""

from __future__ import annotations

import pytest

import duckdb_sem
from duckdb_sem.backends.llama_rates import REFERENCE, RateMeter


def test_the_reference_until_enough_requests_are_measured() -> None:
    meter = RateMeter()
    for _ in range(3):
        meter.add("decide", 100, 1, 0.5)
    rate = meter.throughput(2)
    assert (rate.prompt_tokens_per_s, rate.completion_tokens_per_s) == REFERENCE
    assert rate.source.startswith("reference")


def test_rates_solved_from_decisions_and_generated_values() -> None:
    meter = RateMeter()
    for _ in range(4):
        meter.add("decide", 200, 1, 0.5)  # 400 prompt tokens/s
        meter.add("generate", 100, 20, 0.25 + 2.0)  # 0.25 s of prompt, 20 tokens in 2 s
    rate = meter.throughput(2)
    assert rate.prompt_tokens_per_s == pytest.approx(400.0)
    assert rate.completion_tokens_per_s == pytest.approx(10.0)
    assert rate.source.startswith("measured in this process")
    assert rate.seconds(calls=1, prompt_tokens=400, completion_tokens=10) == pytest.approx(2.0)


def test_only_decisions_measured_keep_the_reference_completion_rate() -> None:
    meter = RateMeter()
    for _ in range(5):
        meter.add("decide", 100, 1, 0.1)
    rate = meter.throughput(4)
    assert rate.prompt_tokens_per_s == pytest.approx(1000.0)
    assert rate.completion_tokens_per_s == REFERENCE[1]
    assert "from 5 decisions in this process" in rate.source


@pytest.mark.model
@pytest.mark.slow
def test_explain_on_the_embedded_model_uses_what_it_measured() -> None:
    con = duckdb_sem.connect(backend="llama:?threads=1", cache="off")
    con.execute(
        "CREATE TABLE r AS SELECT * FROM (VALUES ('great film'), ('dull'), ('fun'), ('bad'), "
        "('moving')) t(text)"
    )
    q = "SELECT text FROM r WHERE sem_filter('Is this review positive? {text}')"
    before = next(x for x in con.explain_semantic(q).splitlines() if x.startswith("time"))
    assert "reference" in before and "benchmarks/results/throughput.md" in before
    con.sql(q).fetchall()
    after = next(x for x in con.explain_semantic(q).splitlines() if x.startswith("time"))
    assert "decisions in this process" in after, after
    con.close()
