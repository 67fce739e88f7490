"""Answer arrays of repeated batches: a cache-backed repeat reads whole arrays, counted as the
cache hits a row-by-row cached run reports; any changed row, and a connection without a cache,
asks again."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

import duckdb_sem
from duckdb_sem.cache.arrays import AnswerArrays, Remembered, array_digest

Q = "SELECT id, sem_map('{text} in short') AS g FROM r WHERE sem_filter('{text} is positive')"


def _open(cache: str) -> duckdb_sem.SemConnection:
    con = duckdb_sem.connect(backend="test:?yes_if=good", cache=cache)
    con.execute("CREATE TABLE r AS SELECT i AS id, CASE WHEN i % 2 = 0 THEN 'good ' "
                "ELSE 'bad ' END || i AS text FROM range(600) t(i)")  # fmt: skip
    return con


def test_a_repeat_reads_the_cache_and_counts_what_a_cached_run_counts(tmp_path: Path) -> None:
    con = _open(str(tmp_path / "c.sqlite"))
    first = con.sql(Q).fetchall()
    cold = con.stats()
    assert cold.physical_calls == 900 and cold.cache_hits == 0
    assert con.sql(Q).fetchall() == first
    warm = con.stats()
    assert warm.physical_calls == 0 and warm.cache_hits == 900
    assert warm.llm_calls == cold.llm_calls and warm.prompt_tokens == cold.prompt_tokens
    con.execute("UPDATE r SET text = 'good changed' WHERE id = 1")  # one row of one batch
    changed = con.sql(Q).fetchall()
    assert (1, "good changed in short") in changed
    assert con.stats().physical_calls == 2  # the changed row's filter and map, nothing else
    con.close()


def test_without_a_cache_every_run_asks_again() -> None:
    con = _open("off")
    con.sql(Q).fetchall()
    con.sql(Q).fetchall()
    assert con.stats().physical_calls == 900
    con.close()


def test_digests_tell_arrays_apart_by_content_not_by_layout() -> None:
    whole = pa.array(["a", "b", "c", "d"])
    assert array_digest(("op",), [whole.slice(1, 2)]) == array_digest(("op",), [whole.slice(1, 2)])
    assert array_digest(("op",), [whole.slice(1, 2)]) != array_digest(("op",), [whole.slice(2, 2)])
    assert array_digest(("op",), [whole]) != array_digest(("other",), [whole])
    assert array_digest(("op",), [pa.array(["a", None])]) != array_digest(
        ("op",), [pa.array(["a", ""])]
    )
    memo = AnswerArrays(capacity=2)
    for i in range(3):
        memo.put(bytes([i]), Remembered(pa.array([i]), ()))
    assert memo.get(bytes([0])) is None and memo.get(bytes([2])) is not None
