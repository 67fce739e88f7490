"""sem_sim_join and sem_search through connect(), on a keyword TEST DOUBLE embedder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from embed_doubles import KeywordEmbedder

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend


@pytest.fixture
def embedder() -> KeywordEmbedder:
    return KeywordEmbedder(["cat", "dog", "stock", "rain"])


@pytest.fixture
def db(embedder: KeywordEmbedder, tmp_path: Path) -> Iterator[duckdb_sem.SemConnection]:
    con = duckdb_sem.connect(backend=RuleBackend(), cache=str(tmp_path / "c.sqlite"),
                             embed_backend=embedder)  # fmt: skip
    con.execute(
        "CREATE TABLE q AS SELECT * FROM (VALUES (1, 'my cat'), (2, 'stock stock prices'), "
        "(3, NULL)) t(id, txt)"
    )
    con.execute(
        "CREATE TABLE d AS SELECT * FROM (VALUES (10, 'a cat and a dog'), (20, 'cat cat'), "
        "(30, 'stock news'), (40, 'rain today'), (50, 'nothing at all')) t(id, body)"
    )
    yield con
    con.close()


def test_sim_join_returns_each_left_rows_top_k_with_rank_and_similarity(
    db: duckdb_sem.SemConnection,
) -> None:
    rows = db.sql(
        "SELECT id, id_1, sem_rank, round(sem_similarity, 3) "
        "FROM sem_sim_join('q', 'd', 'txt', 'body', 2) ORDER BY id, sem_rank"
    ).fetchall()
    # stock-only text: "nothing at all" (only the constant axis) beats "cat cat" for 2nd
    assert [r[:3] for r in rows] == [(1, 20, 1), (1, 10, 2), (2, 30, 1), (2, 50, 2)]
    assert rows[0][3] > rows[1][3] > 0.5 and rows[2][3] > 0.9  # exact cosines, best first
    # the NULL text of q.id = 3 matches nothing
    assert db.stats().llm_calls == 0


def test_sim_join_with_k_past_the_right_side_returns_every_pair(
    db: duckdb_sem.SemConnection,
) -> None:
    (count,) = db.sql("SELECT count(*) FROM sem_sim_join('q', 'd', 'txt', 'body', 99)").fetchone()
    assert count == 2 * 5


def test_search_ranks_rows_by_similarity_to_the_text(db: duckdb_sem.SemConnection) -> None:
    rows = db.sql("SELECT id, sem_rank FROM sem_search('d', 'body', 'rain rain', 2)").fetchall()
    assert rows[0] == (40, 1) and rows[1][1] == 2
    got = db.sql(
        "SELECT s.id FROM sem_search('SELECT * FROM d WHERE id > 10', 'body', 'cat', 1) AS s"
    ).fetchall()
    assert got == [(20,)]


def test_embeddings_are_cached_and_counted_apart_from_llm_calls(
    db: duckdb_sem.SemConnection, embedder: KeywordEmbedder
) -> None:
    sql = "SELECT * FROM sem_sim_join('q', 'd', 'txt', 'body', 1)"
    db.sql(sql).fetchall()
    first = db.stats()
    assert (first.embed_calls, first.embed_physical_calls, first.embed_cache_hits) == (7, 7, 0)
    ran = embedder.texts_embedded
    db.sql(sql).fetchall()
    again = db.stats()
    assert (again.embed_calls, again.embed_physical_calls, again.embed_cache_hits) == (7, 0, 7)
    assert embedder.texts_embedded == ran  # the persistent cache answered
    assert again.llm_calls == again.physical_calls == 0


@pytest.mark.parametrize(
    ("sql", "error", "message"),
    [
        ("SELECT * FROM sem_search('nope', 'body', 'x', 1)", duckdb_sem.BindError, "nope"),
        ("SELECT * FROM sem_search('d', 'bdy', 'x', 1)", duckdb_sem.UnknownColumnError,
         "unknown column 'bdy'; available: id, body"),
        ("SELECT * FROM sem_search('d', 'id', 'x', 1)", duckdb_sem.BindError, "not text"),
        ("SELECT * FROM sem_search('d', 'body', 'x', 0)", duckdb_sem.BindError, "at least 1"),
        ("SELECT * FROM sem_sim_join('q', 'd', 'txt', 'body', -2)", duckdb_sem.BindError,
         "at least 1"),
        ("SELECT * FROM sem_sim_join('q', 'd', 'txt', 'body', 'x')", duckdb_sem.BindError,
         "positive integer literal"),
        ("SELECT * FROM sem_sim_join('q', 'd', 'txt', 2)", duckdb_sem.BindError,
         "takes 5 arguments"),
        ("SELECT * FROM sem_search('d', 'body', '  ', 2)", duckdb_sem.BindError, "empty"),
    ],
)  # fmt: skip
def test_bad_calls_fail_before_any_embedding(
    db: duckdb_sem.SemConnection, embedder: KeywordEmbedder, sql: str, error: type, message: str
) -> None:
    with pytest.raises(error, match=message):
        db.sql(sql).fetchall()
    assert embedder.texts_embedded == 0
