"""The throughput window stays bounded however many completions a long query reports."""

from __future__ import annotations

import pytest

from duckdb_sem.scheduler.accounting import ThroughputWindow


def test_rate_counts_only_the_last_window() -> None:
    w = ThroughputWindow(seconds=10.0)
    w.add(100, now=0.0)
    w.add(50, now=5.0)
    assert w.rate(now=9.0) == pytest.approx(15.0)
    assert w.rate(now=12.0) == pytest.approx(5.0)  # the event at t=0 left the window
    assert w.rate(now=30.0) == 0.0


def test_a_million_completions_keep_a_bounded_number_of_entries() -> None:
    w = ThroughputWindow(seconds=10.0, buckets=100)
    for i in range(1_000_000):
        w.add(30, now=i * 1e-4)  # 10,000 completions per second for 100 s, rate() never called
    assert len(w._events) <= 101
    assert w.rate(now=100.0) == pytest.approx(30 * 10_000, rel=0.02)
