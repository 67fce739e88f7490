"""Two models in one query, one of them the real embedded model (SmolLM2-135M, llama.cpp).

The connection's default is the rule backend (deterministic, it counts its calls); the map runs
on the named model ``small``, the real one. Asserted: which backend answered which operator
(from the rule backend's count and the query's physical calls), that max_tokens bounds the real
model's answers, and that another temperature is asked again rather than served from cache.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend

pytestmark = pytest.mark.model


def test_a_query_mixing_the_rule_backend_and_the_real_model(tmp_path: Path) -> None:
    rules = RuleBackend(yes_if=["film"])
    with duckdb_sem.connect(
        backend=rules, cache=str(tmp_path / "c.sqlite"), models={"small": "llama:?threads=1"}
    ) as con:
        con.execute(
            "CREATE TABLE reviews AS SELECT * FROM (VALUES (1, 'A moving film, wonderful cast.'),"
            " (2, 'Boring and far too long.'), (3, 'A funny film for the whole family.')) "
            "t(id, text)"
        )
        sql = (
            "SELECT id, sem_map('Summarize in one word: {text}', model := 'small', "
            "max_tokens := 4, temperature := %s) AS gist FROM reviews "
            "WHERE sem_filter('Is this a movie review? {text}') ORDER BY id"
        )
        rows = con.sql(sql % "0.0").fetchall()
        assert [r[0] for r in rows] == [1, 3]
        assert all(isinstance(r[1], str) and r[1].strip() for r in rows)
        stats = con.stats()
        assert rules.calls == 3  # the filter, every row, on the default backend
        small_calls = stats.physical_calls - rules.calls
        assert small_calls == 2  # the map, on the rows the filter kept, on the real model
        small_tokens = stats.physical_completion_tokens - rules.calls  # a decision is 1 token
        assert 0 < small_tokens <= 4 * small_calls
        small = con.models.backend("small")
        assert small is not None and "llama" in small.backend_id
        assert small.backend_id != rules.backend_id
        con.sql(sql % "0.0").fetchall()
        assert con.stats().physical_calls == 0  # both models' answers are cached
        con.sql(sql % "0.8").fetchall()
        assert con.stats().physical_calls == 2  # another temperature: the real model again
        assert rules.calls == 3
