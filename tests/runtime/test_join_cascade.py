"""A sem_join cascade: after blocking, an embedding helper decides the candidate pairs it is sure
of and the LLM the rest; only with approximation allowed; EXPLAIN and the cost model say so.
TEST DOUBLES: a keyword embedder (the helper compares the two sides' texts) and a same-topic
join judge."""

from __future__ import annotations

from pathlib import Path

from embed_doubles import KeywordEmbedder, SameTopicJudge, topic_tables

import duckdb_sem

TOPICS, LEFT = 3, 600  # 1,800 pairs, 600 matches
QUERY = "SELECT l.id, r.rid FROM l JOIN r ON sem_join('{l.txt} is about {r.body}')"


def _open(tmp_path: Path, **options: object) -> duckdb_sem.SemConnection:
    embedder = KeywordEmbedder([f"w{i}" for i in range(TOPICS)])
    con = duckdb_sem.connect(backend=SameTopicJudge(), cache=str(tmp_path / "c.sqlite"),
                             embed_backend=embedder, **options)  # type: ignore[arg-type]  # fmt: skip
    topic_tables(con, TOPICS, LEFT)
    return con


def test_blocked_pairs_are_cascaded_and_the_cost_model_counts_it(tmp_path: Path) -> None:
    plain = _open(tmp_path / "lossless")
    lossless = set(plain.sql(QUERY).fetchall())
    assert "CASCADE" not in plain.explain_semantic(QUERY)  # not without approximation
    plain.close()
    con = _open(tmp_path, approximate=True)
    plan = con.explain_semantic(QUERY)
    assert "BLOCKED cosine >= " in plan and "sem_join runs as a cascade" in plan
    assert "target-labelled pairs" in plan and "at confidence 0.90" in plan
    candidates = int(plan.split(" keeps ")[1].split(" of ")[0].replace(",", ""))
    share = float(plan.split("the helper decides ")[1].split("%")[0]) / 100
    calls = int(plan.split("CASCADE")[1].split("calls≈")[1].split()[0].replace(",", ""))
    # the LLM is expected to answer the blocked pairs the helper leaves, and each SEU's sample
    assert calls == round(candidates * (0.05 + 0.95 * (1 - share))) and calls < candidates
    got = set(con.sql(QUERY).fetchall())
    hits = len(got & lossless)
    assert hits / len(got) >= 0.9 and hits / len(lossless) >= 0.9
    stats = con.stats()
    assert stats.cascade_helper_rows > 0  # the helper decided some candidate pairs alone
    assert stats.cascade_target_rows < candidates
    con.close()
