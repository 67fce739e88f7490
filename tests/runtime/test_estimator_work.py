"""The estimator's samples are SEUs like any other: scheduled, cached, counted apart."""

from __future__ import annotations

from pathlib import Path

import pytest

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend


def test_estimator_samples_are_scheduled_cached_and_counted_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DUCKDB_SEM_ESTIMATOR_BACKEND", "test:?hash=0.4")
    cache = str(tmp_path / "c.sqlite")
    target = RuleBackend(hash_share=0.5)
    con = duckdb_sem.connect(backend=target, cache=cache)
    con.execute("CREATE TABLE t AS SELECT range AS id, 'row ' || range AS txt FROM range(300)")
    sql = "SELECT id FROM t WHERE sem_filter('Is {txt} interesting?')"
    first = con.sql(sql).fetchall()
    stats = con.stats()
    assert stats.estimator_calls > 0
    assert stats.llm_calls == 300 == target.calls  # the target's work alone
    con.close()

    again = duckdb_sem.connect(backend=target, cache=cache)
    again.execute("CREATE TABLE t AS SELECT range AS id, 'row ' || range AS txt FROM range(300)")
    assert again.sql(sql).fetchall() == first
    stats = again.stats()
    assert stats.estimator_calls > 0
    assert stats.estimator_cache_hits == stats.estimator_calls  # the samples were cached
    assert "selectivity and tokens from" in again.explain_semantic(sql)
