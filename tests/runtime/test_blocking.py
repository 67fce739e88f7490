"""Blocking a sem_join: only with approximation allowed, a subset of the lossless answer, fewer
LLM calls, and only where the sample bounds the recall at the confidence asked; EXPLAIN says so.
TEST DOUBLES: a keyword embedder and a same-topic join judge."""

from __future__ import annotations

from pathlib import Path

import pytest
from embed_doubles import KeywordEmbedder, SameTopicJudge, topic_tables

import duckdb_sem

TOPICS = 10
LEFT = 300  # 3,000 pairs, 300 matches
QUERY = "SELECT l.id, r.rid FROM l JOIN r ON sem_join('{l.txt} is about {r.body}')"


@pytest.fixture
def judge() -> SameTopicJudge:
    return SameTopicJudge()


def _open(judge: SameTopicJudge, tmp_path: Path, **options: object) -> duckdb_sem.SemConnection:
    # each left row names one topic; its words put it near its topic's right row
    embedder = KeywordEmbedder([f"w{i}" for i in range(TOPICS)])
    con = duckdb_sem.connect(backend=judge, cache=str(tmp_path / "c.sqlite"),
                             embed_backend=embedder, **options)  # type: ignore[arg-type]  # fmt: skip
    topic_tables(con, TOPICS, LEFT)
    return con


@pytest.fixture
def lossless(judge: SameTopicJudge, tmp_path: Path) -> set[tuple[int, int]]:
    con = _open(SameTopicJudge(), tmp_path / "lossless")
    rows = set(con.sql(QUERY).fetchall())
    assert con.stats().llm_calls == LEFT * TOPICS  # the nested loop asks every pair
    con.close()
    return rows


def test_no_blocking_unless_approximation_is_allowed(
    judge: SameTopicJudge, tmp_path: Path, lossless: set[tuple[int, int]]
) -> None:
    con = _open(judge, tmp_path)
    plan = con.explain_semantic(QUERY)
    assert "BLOCKED" not in plan and "APPROXIMATE" not in plan
    assert set(con.sql(QUERY).fetchall()) == lossless
    assert con.stats().llm_calls == LEFT * TOPICS
    assert con.stats().embed_calls == 0  # not even an embedding
    con.close()


def test_blocked_join_is_a_subset_with_the_target_recall_and_far_fewer_calls(
    judge: SameTopicJudge, tmp_path: Path, lossless: set[tuple[int, int]]
) -> None:
    con = _open(judge, tmp_path, approximate=True, join_recall=0.9)
    plan = con.explain_semantic(QUERY)
    assert "BLOCKED cosine >= " in plan
    assert "APPROXIMATE plan (duckdb_sem.approximate = on)" in plan
    assert "pairs (" in plan and "sample recall" in plan and "target 0.90" in plan
    bound = float(plan.split("recall >= ")[1].split(" ")[0])
    assert bound >= 0.9 and "at confidence 0.90" in plan  # the bound, beside the sample figure
    got = set(con.sql(QUERY).fetchall())
    stats = con.stats()
    assert got <= lossless  # blocking only drops pairs, never invents one
    assert len(got) >= 0.9 * len(lossless)
    assert stats.llm_calls < 0.7 * LEFT * TOPICS
    assert stats.embed_calls > 0
    con.close()


def test_set_approximate_per_session_and_show_reset(judge: SameTopicJudge, tmp_path: Path) -> None:
    con = _open(judge, tmp_path)
    assert con.sql("SHOW duckdb_sem.approximate").fetchall() == [("off",)]
    con.execute("SET duckdb_sem.approximate = on")
    con.execute("SET duckdb_sem.join_recall = 0.8")
    assert con.sql("SHOW duckdb_sem.join_recall").fetchall() == [("0.8",)]
    assert "target 0.80" in con.explain_semantic(QUERY)
    con.execute("SET duckdb_sem.confidence = 0.8")
    assert con.sql("SHOW duckdb_sem.confidence").fetchall() == [("0.8",)]
    assert "at confidence 0.80" in con.explain_semantic(QUERY)
    con.execute("RESET duckdb_sem.approximate")
    assert "BLOCKED" not in con.explain_semantic(QUERY)
    for bad, message in (
        ("SET duckdb_sem.join_recall = 1.5", "in \\(0, 1\\]"),
        ("SET duckdb_sem.join_recall = lots", "takes a number"),
        ("SET duckdb_sem.approximate = maybe", "not a switch; set it to on"),
        ("SET duckdb_sem.confidence = 1", "confidence must be in \\(0, 1\\)"),
        ("SET duckdb_sem.aproximate = on", "unknown setting duckdb_sem.aproximate"),
    ):
        with pytest.raises(duckdb_sem.ConfigError, match=message):
            con.execute(bad)
    con.close()


def test_small_joins_stay_nested_loops(judge: SameTopicJudge, tmp_path: Path) -> None:
    con = _open(judge, tmp_path, approximate=True)
    con.execute("CREATE TABLE l10 AS SELECT * FROM l WHERE id < 10")
    plan = con.explain_semantic(QUERY.replace("FROM l JOIN", "FROM l10 AS l JOIN"))
    assert "BLOCKED" not in plan  # 10 x TOPICS pairs: under the 400 that make a sample worth it
    assert "approximate plans not taken:" in plan
    assert (f"{10 * TOPICS} pairs, under the 400 that make a labelled sample worth it: "
            "nested loop") in plan  # fmt: skip
    con.close()


def test_connect_rejects_a_bad_recall_target(tmp_path: Path) -> None:
    with pytest.raises(duckdb_sem.ConfigError, match="recall target"):
        duckdb_sem.connect(backend="test:", cache="off", join_recall=0.0)


def test_relation_api_join_is_blocked_too_and_udf_path_never(
    judge: SameTopicJudge, tmp_path: Path, lossless: set[tuple[int, int]]
) -> None:
    con = _open(judge, tmp_path, approximate=True, join_recall=0.9)
    rel = con.table("l").sem_join(con.table("r"), "{l.txt} is about {r.body}")
    got = {(row[0], row[2]) for row in rel.fetchall()}
    assert got <= lossless and len(got) >= 0.9 * len(lossless)
    assert con.stats().llm_calls < 0.7 * LEFT * TOPICS
    con.close()
    plain = _open(SameTopicJudge(), tmp_path / "udf", approximate=True, optimize=False)
    assert set(plain.sql(QUERY).fetchall()) == lossless  # DuckDB's nested loop, as written
    plain.close()


def test_the_sample_grows_until_its_bound_reaches_the_target(
    judge: SameTopicJudge, tmp_path: Path
) -> None:
    con = _open(judge, tmp_path, approximate=True, join_recall=0.9)
    plan = con.explain_semantic(QUERY)
    learned = int(plan.split("threshold learned from ")[1].split(" ")[0])
    assert learned > 100, plan  # 100 labels cannot bound the 2,700 pairs without a match
    con.close()


def test_a_sample_that_cannot_bound_the_recall_keeps_the_nested_loop(
    judge: SameTopicJudge, tmp_path: Path, lossless: set[tuple[int, int]]
) -> None:
    # recall 0.95 at 90% would need the 2,700 dissimilar pairs shown to hide under 15 matches:
    # more labels than a quarter of the pairs, so the plan stays lossless
    con = _open(judge, tmp_path, approximate=True)
    assert "BLOCKED" not in con.explain_semantic(QUERY)
    assert set(con.sql(QUERY).fetchall()) == lossless
    con.close()
