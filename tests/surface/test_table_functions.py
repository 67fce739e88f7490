"""Semantic table functions in FROM (sem_topk, sem_extract, sem_join) on the rule backend."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.errors import AmbiguousColumnError, BindError, OutputTypeError, UnknownColumnError
from duckdb_sem.surface.table_functions import bind_fields, parse_table_call

# The rule backend says yes iff the rendered row contains "good" or "great": templates here
# avoid those words so that only the data decides.


def _registered(con: duckdb_sem.SemConnection) -> int:
    ((n,),) = con.duckdb.execute(
        "SELECT count(*) FROM duckdb_views() WHERE starts_with(view_name, '__sem_tf_')"
    ).fetchall()
    return int(n)


def test_topk_ranks_by_score_ties_in_input_order(
    con: duckdb_sem.SemConnection, rules: RuleBackend
) -> None:
    rel = con.sql(
        "SELECT id, sem_rank, sem_score FROM sem_topk('reviews', 3, '{text} is positive') "
        "ORDER BY sem_rank"
    )
    assert rel.fetchall() == [(1, 1, 1.0), (3, 2, 1.0), (2, 3, -1.0)]
    assert rules.calls == 4  # the NULL text costs nothing
    assert con.stats().llm_calls == 4


def test_topk_over_a_query_in_a_cte_joined_to_a_table(con: duckdb_sem.SemConnection) -> None:
    rows = con.sql(
        "WITH best AS (SELECT * FROM sem_topk('SELECT id, text, genre FROM reviews "
        "WHERE genre = ''comedy''', 1, '{text} is fun')) "
        "SELECT best.id, m.mid FROM best JOIN movies m ON best.genre = m.genre"
    ).fetchall()
    assert rows == [(3, 2)]


def test_topk_scanned_twice_asks_once(con: duckdb_sem.SemConnection, rules: RuleBackend) -> None:
    rows = con.sql(
        "WITH t AS MATERIALIZED (SELECT * FROM sem_topk('reviews', 2, '{text} ok')) "
        "SELECT a.id, b.id FROM t a JOIN t b ON a.sem_rank < b.sem_rank"
    ).fetchall()
    assert rows == [(1, 3)]
    assert rules.calls == 4


def test_extract_one_typed_column_per_field(con: duckdb_sem.SemConnection) -> None:
    con.execute(
        "SELECT id, n, words FROM sem_extract('reviews', '{text}', "
        "'STRUCT(n INTEGER, words VARCHAR[])') WHERE id IN (1, 4) ORDER BY id"
    )
    assert [str(d[1]) for d in con.description] == ["INTEGER", "INTEGER", "VARCHAR[]"]
    assert con.fetchall() == [(1, 11, ["a", "good", "film"]), (4, None, None)]


def test_extract_is_lazy(rules: RuleBackend, tmp_path: Path) -> None:
    con = duckdb_sem.connect(backend=rules, cache=str(tmp_path / "c.sqlite"), batch_size=10)
    con.execute("CREATE TABLE t AS SELECT range AS id, 'row ' || range AS text FROM range(1000)")
    rel = con.sql("SELECT * FROM sem_extract('t', '{text}', 'STRUCT(n INTEGER)') AS x")
    assert rules.calls == 0  # nothing runs until rows are fetched
    assert rel.limit(5).fetchall()[0] == (0, "row 0", 5)
    assert 0 < rules.calls < 100  # DuckDB pulled a few batches of 10, not all 1,000 rows


def test_join_pairs_with_both_sides_columns(
    con: duckdb_sem.SemConnection, rules: RuleBackend
) -> None:
    rel = con.sql("SELECT * FROM sem_join('reviews', 'movies', '{l.text} fits {r.genre}') AS j")
    assert rel.columns == ["id", "text", "genre", "score", "mid", "genre_1"]
    assert sorted((r[0], r[4]) for r in rel.fetchall()) == [(1, 1), (1, 2), (3, 1), (3, 2)]
    assert rules.calls == 8  # 4 non-NULL texts x 2 movies


def test_join_by_table_names_in_from_and_joined(con: duckdb_sem.SemConnection) -> None:
    rows = con.sql(
        "SELECT j.id, m.mid FROM movies m "
        "JOIN sem_join('SELECT id, text FROM reviews', 'movies', '{text} / {movies.genre}') j "
        "ON j.mid = m.mid WHERE m.genre = 'comedy' ORDER BY 1"
    ).fetchall()
    assert rows == [(1, 2), (3, 2)]


def test_scalar_sem_join_is_untouched(con: duckdb_sem.SemConnection) -> None:
    rows = con.sql(
        "SELECT r.id, m.mid FROM reviews r JOIN movies m ON sem_join('{r.text} / {m.genre}') "
        "ORDER BY 1, 2"
    ).fetchall()
    assert rows == [(1, 1), (1, 2), (3, 1), (3, 2)]


def test_registrations_are_dropped_after_the_statement(con: duckdb_sem.SemConnection) -> None:
    rel = con.sql("SELECT * FROM sem_topk('reviews', 1, '{text} ok')")
    assert _registered(con) == 1
    assert len(rel.fetchall()) == 1
    del rel
    gc.collect()
    con.sql("SELECT 1").fetchall()  # the next statement unregisters
    assert _registered(con) == 0


@pytest.mark.parametrize(
    ("sql", "error", "message"),
    [
        ("SELECT * FROM sem_topk('nope', 2, '{text} ok')", BindError, "nope"),
        ("SELECT * FROM sem_topk('reviews', 0, '{text} ok')", BindError, "positive integer"),
        ("SELECT * FROM sem_topk('reviews', -1, '{text} ok')", BindError, "positive integer"),
        ("SELECT * FROM sem_topk('reviews', 2.5, '{text} ok')", BindError, "positive integer"),
        ("SELECT * FROM sem_topk('reviews', 'x', '{text} ok')", BindError, "positive integer"),
        ("SELECT * FROM sem_topk('reviews', 2)", BindError, "3 arguments"),
        ("SELECT * FROM sem_topk('reviews', 2, '{nope} ok')", UnknownColumnError, "nope"),
        ("SELECT * FROM sem_topk('reviews', 2, '{0} ok')", BindError, "name columns"),
        ("SELECT * FROM sem_extract('reviews', '{text}', 'INTEGER')", OutputTypeError, "STRUCT"),
        ("SELECT * FROM sem_extract('reviews', '{text}', 'STRUCT(a FOO)')", OutputTypeError, "FOO"),
        ("SELECT * FROM sem_join('reviews', 'nope', '{l.text}')", BindError, "nope"),
        ("SELECT * FROM sem_join('reviews', 'movies', '{genre}')", AmbiguousColumnError, "l.genre"),
        ("SELECT * FROM sem_join('reviews', 'movies', '{x.text}')", UnknownColumnError, "x"),
        ("SELECT * FROM sem_join('reviews', movies, '{l.text}')", BindError, "string literal"),
    ],
)
def test_errors_before_any_llm_call(
    con: duckdb_sem.SemConnection,
    rules: RuleBackend,
    sql: str,
    error: type[Exception],
    message: str,
) -> None:
    with pytest.raises(error, match=message):
        con.sql(sql).fetchall()
    assert rules.calls == 0


def test_parse_and_bind_without_a_connection() -> None:
    node = sqlglot.parse_one(
        "SELECT * FROM sem_join('reviews', 'SELECT * FROM plots', '{reviews.text} / {r.title}')",
        dialect="duckdb",
    ).find(exp.Anonymous)
    assert node is not None
    call = parse_table_call(node)
    assert call.inputs == ("SELECT * FROM reviews", "SELECT * FROM plots")
    assert call.labels == ("reviews", None)
    bound = bind_fields(call, [["id", "text"], ["title", "text"]])
    assert bound.template == "{0} / {1}"
    assert bound.refs == ((0, "text"), (1, "title"))


def test_an_input_with_a_semantic_call_is_read_when_rows_are_pulled(
    rules: RuleBackend, tmp_path: Path
) -> None:
    """Opening the statement (``con.sql``, columns) makes no LLM call; the input's filter runs
    when rows are fetched, and its calls are the query's own in ``con.stats()``."""
    con = duckdb_sem.connect(backend=rules, cache=str(tmp_path / "c.sqlite"))
    con.execute(
        "CREATE TABLE t AS SELECT range AS id, 'row ' || range || "
        "CASE WHEN range % 2 = 0 THEN ' good' ELSE ' dull' END AS text FROM range(40)"
    )
    rel = con.sql(
        "SELECT id, sem_rank FROM sem_topk('SELECT id, text FROM t "
        "WHERE sem_filter(''{text} is kept'')', 3, '{text} is nice') ORDER BY sem_rank"
    )
    assert rel.columns == ["id", "sem_rank"]
    assert rules.calls == 0
    rows = rel.fetchall()
    assert [r[1] for r in rows] == [1, 2, 3] and all(r[0] % 2 == 0 for r in rows)
    assert rules.calls == 40 + 20  # the input's filter on every row, the ranking on the kept
    assert con.stats().llm_calls == 60


def test_an_input_never_read_is_released_with_its_connection() -> None:
    """A table function's input with a semantic call holds a cursor (and a share of the
    scheduler) until it is read; an opened statement that is never fetched, or only
    explained, gives it back at close, so the last connection still closes the scheduler."""
    con = duckdb_sem.connect(backend="test:?selectivity=0.37", cache="off")  # its own scheduler
    con.execute("CREATE TABLE t AS SELECT range AS id, 'row ' || range AS text FROM range(10)")
    query = (
        "SELECT * FROM sem_topk('SELECT id, text FROM t WHERE sem_filter(''{text} ok'')', "
        "2, '{text} is nice')"
    )
    rel = con.sql(query)  # opened, never fetched
    con.explain_semantic(query)
    scheduler = con.session.engine.client.scheduler  # type: ignore[attr-defined]
    con.close()
    assert scheduler._closed
    del rel


def test_the_sem_join_table_function_is_blocked_only_when_approximation_is_allowed(
    tmp_path: Path,
) -> None:
    """TEST DOUBLES (a keyword embedder, a same-topic judge): the table function form of
    sem_join takes the same opt-in embedding blocking as a sem_join in JOIN ON."""
    from embed_doubles import KeywordEmbedder, SameTopicJudge

    topics, left = 10, 300  # dense enough for the sample to bound recall 0.9 at 90%
    query = "SELECT id, rid FROM sem_join('l', 'r', '{l.txt} is about {r.body}')"
    got = {}
    for approximate in (False, True):
        embedder = KeywordEmbedder([f"w{i}" for i in range(topics)])
        con = duckdb_sem.connect(backend=SameTopicJudge(), embed_backend=embedder,
                                 cache=str(tmp_path / f"{approximate}.sqlite"),
                                 approximate=approximate, join_recall=0.9)  # fmt: skip
        con.execute(
            f"CREATE TABLE l AS SELECT i AS id, 'topic' || (i % {topics}) || ' w' || "
            f"(i % {topics}) AS txt FROM range({left}) t(i)"
        )
        con.execute(f"CREATE TABLE r AS SELECT i AS rid, 'topic' || i || ' w' || i AS body "
                    f"FROM range({topics}) t(i)")  # fmt: skip
        got[approximate] = (set(con.sql(query).fetchall()), con.stats())
        con.close()
    (lossless, plain), (blocked, approx) = got[False], got[True]
    assert plain.llm_calls == left * topics and plain.embed_calls == 0
    assert len(lossless) == left
    assert blocked <= lossless and len(blocked) >= 0.9 * len(lossless)
    assert approx.llm_calls < 0.7 * left * topics and approx.embed_calls > 0
