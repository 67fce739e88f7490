"""The relation API (``con.table(...).sem_filter(...)``) and caller-scope DataFrames/Arrow."""

from __future__ import annotations

import duckdb
import pandas as pd
import pyarrow as pa
import pytest

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.errors import BindError, UnknownColumnError
from duckdb_sem.session.relation import SemRelation


def test_chain_is_one_planned_query(con: duckdb_sem.SemConnection, rules: RuleBackend) -> None:
    rel = con.table("reviews").sem_map("{text} in five words", name="gist")
    rel = rel.sem_filter("{text} is positive")
    plan = con.explain_semantic(rel.sql_query())
    # written map-then-filter; the optimizer filters first (cheaper): one plan for the chain
    assert plan.index("SemMap") < plan.index("SemFilter")
    assert rel.fetchall() == [
        (1, "a good film", "drama", 4.5, "a good film in five"),
        (3, "great fun", "comedy", 5.0, "great fun in five words"),
    ]
    assert rules.calls == 4 + 2  # 4 decisions, then 2 maps for the rows that passed


def test_duckdb_methods_pass_through(con: duckdb_sem.SemConnection) -> None:
    rel = con.table("reviews").filter("score > 2").sem_filter("{text} ok")
    assert "score > 2" in rel.sql_query()  # a relational filter stays in the chain
    assert rel.aggregate("count(*)").fetchall() == [(2,)]
    assert rel.order("id DESC").limit(1).fetchall()[0][0] == 3
    assert isinstance(rel.arrow(), pa.Table | pa.RecordBatchReader)
    assert list(rel.df()["id"]) == [1, 3]
    assert rel.columns == ["id", "text", "genre", "score"]
    again = rel.limit(1).sem_map("{genre}", name="g")  # a DuckDB result chains on
    assert isinstance(again, SemRelation)
    assert again.fetchall() == [(1, "a good film", "drama", 4.5, "drama")]


def test_sem_join_by_alias_and_side(con: duckdb_sem.SemConnection, rules: RuleBackend) -> None:
    reviews = con.table("reviews").sem_filter("{text} is positive")
    for template in ("{reviews.text} fits {movies.genre}", "{left.text} fits {right.genre}"):
        rel = reviews.sem_join(con.table("movies"), template)
        assert "SemJoin" in con.explain_semantic(rel.sql_query())
        assert sorted((r[0], r[4]) for r in rel.fetchall()) == [(1, 1), (1, 2), (3, 1), (3, 2)]
        assert rel.columns == ["id", "text", "genre", "score", "mid", "genre_1"]
    with pytest.raises(BindError, match="set_alias"):
        reviews.sem_join(con.table("reviews"), "{text}")
    m = con.table("reviews").set_alias("m")
    assert len(reviews.sem_join(m, "{reviews.text} / {m.genre}").fetchall()) == 2 * 5


def test_sem_agg_and_sem_topk(con: duckdb_sem.SemConnection) -> None:
    agg = con.table("reviews").sem_filter("{text} ok").sem_agg("{text}", by=["genre"], name="s")
    assert sorted(agg.fetchall()) == [("comedy", "- great fun"), ("drama", "- a good film")]
    assert con.table("reviews").sem_agg("{genre}").fetchall()[0][0].startswith("- drama")
    top = con.table("reviews").filter("genre = 'drama'").sem_topk("{text} is fun", 1)
    assert top.fetchall() == [(1, "a good film", "drama", 4.5, 1, 1.0)]
    ext = con.table("movies").sem_extract("{genre}", "STRUCT(n INTEGER)").fetchall()
    assert ext == [(1, "drama", 5), (2, "comedy", 6)]


def test_relation_errors(con: duckdb_sem.SemConnection, rules: RuleBackend) -> None:
    with pytest.raises(duckdb.CatalogException, match="nope"):  # DuckDB's own error
        con.table("nope")
    with pytest.raises(UnknownColumnError, match="unknown column"):
        con.table("reviews").sem_filter("{nope} ok")
    with pytest.raises(BindError, match="already has a column"):
        con.table("reviews").sem_map("{text}", name="genre")
    with pytest.raises(BindError, match="positive integer"):
        con.table("reviews").sem_topk("{text}", 0).fetchall()
    assert rules.calls == 0


def test_caller_scope_dataframes_and_arrow(con: duckdb_sem.SemConnection) -> None:
    notes = pd.DataFrame({"id": [1, 2], "note": ["good stuff", "meh"]})
    tags = pa.table({"id": [1, 2], "tag": ["x", "great"]})
    assert con.sql("SELECT id FROM notes WHERE sem_filter('{note} ok')").fetchall() == [(1,)]
    assert con.sql("SELECT id FROM tags WHERE sem_filter('{tag} ok')").fetchall() == [(2,)]
    assert con.table("notes").sem_filter("{note} ok").fetchall() == [(1, "good stuff")]
    top = con.sql("SELECT id FROM sem_topk('notes', 1, '{note} ok')").fetchall()
    assert top == [(1,)]
    assert con.from_df(notes).sem_filter("{note} ok").fetchall() == [(1, "good stuff")]
    assert con.from_arrow(tags).sem_filter("{tag} ok").fetchall() == [(2, "great")]
    reviews = pd.DataFrame({"id": [99]})  # noqa: F841 (a catalog table wins over a variable)
    assert con.sql("SELECT count(*) FROM reviews").fetchall() == [(5,)]


def test_caller_scope_changes_between_statements(con: duckdb_sem.SemConnection) -> None:
    frame = pd.DataFrame({"t": ["good"]})
    assert con.sql("SELECT count(*) FROM frame WHERE sem_filter('{t} ok')").fetchall() == [(1,)]
    frame = pd.DataFrame({"t": ["good", "great", "no"]})  # noqa: F841 (read by name in SQL)
    assert con.sql("SELECT count(*) FROM frame WHERE sem_filter('{t} ok')").fetchall() == [(2,)]
