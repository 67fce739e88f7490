"""The three ways in (SQL, relation API, table functions) on the real embedded model, tiny samples.

Structure, types, call counts and agreement between the ways in are asserted, not answers:
SmolLM2-135M is tiny and on four rows its ranking is not reliable (see MACHINE.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

import duckdb_sem

pytestmark = pytest.mark.model

REVIEWS = pd.DataFrame(
    {
        "id": [1, 2, 3, 4],
        "text": [
            "Dull, overlong and completely forgettable.",
            "A wonderful, moving film with terrific performances. I loved it.",
            "Terrible acting and a boring, stupid plot.",
            "An absolute delight: funny, warm and beautifully made.",
        ],
    }
)


@pytest.fixture(scope="module")
def llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb_sem.SemConnection]:
    cache = tmp_path_factory.mktemp("model") / "c.sqlite"
    con = duckdb_sem.connect(backend="llama:", cache=str(cache))
    con.execute("CREATE TABLE reviews AS SELECT * FROM REVIEWS")
    con.execute("CREATE TABLE genres AS SELECT * FROM (VALUES ('comedy'), ('horror')) g(genre)")
    yield con
    con.close()


@pytest.mark.slow  # the first decisions calibrate the prefix: 10-30 s on two busy cores
def test_sql_table_function_topk(llm: duckdb_sem.SemConnection) -> None:
    rows = llm.sql(
        "SELECT id, sem_rank, sem_score FROM "
        "sem_topk('reviews', 2, 'The review \"{text}\" is positive') ORDER BY sem_rank"
    ).fetchall()
    assert [r[1] for r in rows] == [1, 2]
    assert rows[0][2] >= rows[1][2]
    assert llm.stats().llm_calls == 4
    # which two is the model's call (see MACHINE.md), but they must be its two best scores
    ranked = llm.sql(
        "SELECT id, sem_score FROM "
        "sem_topk('reviews', 4, 'The review \"{text}\" is positive') ORDER BY sem_rank"
    ).fetchall()
    assert [r[0] for r in rows] == [r[0] for r in ranked[:2]]
    assert [r[1] for r in ranked] == sorted((r[1] for r in ranked), reverse=True)


def test_relation_api_filter(llm: duckdb_sem.SemConnection) -> None:
    rel = llm.table("reviews").sem_filter('The review "{text}" is positive')
    ids = {r[0] for r in rel.fetchall()}
    assert llm.stats().llm_calls == 4
    # the same decisions through SQL (answered from the cache): the same rows pass
    sql = "SELECT id, sem_filter('The review \"{text}\" is positive') FROM reviews"
    assert ids == {i for i, positive in llm.sql(sql).fetchall() if positive}


def test_sql_scalar_and_dataframe_in_scope(llm: duckdb_sem.SemConnection) -> None:
    frame = REVIEWS.head(2)  # noqa: F841 (read by name in the SQL)
    rows = llm.sql(
        "SELECT id, sem_filter('The review \"{text}\" is positive') AS pos FROM frame ORDER BY id"
    ).fetchall()
    assert [r[0] for r in rows] == [1, 2] and all(isinstance(r[1], bool) for r in rows)


@pytest.mark.slow
def test_table_function_join(llm: duckdb_sem.SemConnection) -> None:
    rel = llm.sql(
        "SELECT * FROM sem_join('SELECT * FROM reviews WHERE id <= 2', 'genres', "
        "'The review \"{l.text}\" is about a {r.genre} film')"
    )
    assert rel.columns == ["id", "text", "genre"]
    got = sorted(rel.fetchall())
    assert llm.stats().llm_calls == 4
    # the same pairs through a SQL JOIN ON sem_join (answered from the cache)
    joined = llm.sql(
        "SELECT l.id, l.text, r.genre FROM (SELECT * FROM reviews WHERE id <= 2) l JOIN genres r "
        "ON sem_join('The review \"{l.text}\" is about a {r.genre} film')"
    ).fetchall()
    assert got == sorted(joined)


@pytest.mark.slow
def test_table_function_extract(llm: duckdb_sem.SemConnection, tmp_path: Path) -> None:
    rel = llm.sql(
        "SELECT id, stars FROM sem_extract('SELECT * FROM reviews WHERE id IN (2, 3)', "
        "'How many stars (1 to 5) does this review give: {text}', 'STRUCT(stars INTEGER)') "
        "ORDER BY id"
    )
    rows = rel.fetchall()
    assert [r[0] for r in rows] == [2, 3]
    assert all(r[1] is None or isinstance(r[1], int) for r in rows)
