"""A sem_filter cascade: only with approximation allowed; the helper decides the rows it is
sure of, the target the rest; EXPLAIN says so. TEST DOUBLES: rule backends (``test:``) as target
and helper, and a keyword embedder; neither reads the template's words."""

from __future__ import annotations

from pathlib import Path

import pytest
from embed_doubles import KeywordEmbedder

import duckdb_sem

TARGET = "test:?yes_if=red"  # the target says yes to red apples
HELPER = "test:?yes_if=red|green"  # the helper to green ones too: sure of pears only
QUERY = "SELECT id FROM t WHERE sem_filter('Is {txt} a ripe apple?')"
APPLES = {i for i in range(600) if i % 3 == 0}  # the red ones


def _open(tmp_path: Path, **options: object) -> duckdb_sem.SemConnection:
    con = duckdb_sem.connect(backend=TARGET, cache=str(tmp_path / "c.sqlite"),
                             embed_backend=KeywordEmbedder(["apple"]), **options)  # type: ignore[arg-type]  # fmt: skip
    con.execute(
        "CREATE TABLE t AS SELECT i AS id, CASE i % 3 WHEN 0 THEN 'red apple ' "
        "WHEN 1 THEN 'green apple ' ELSE 'yellow pear ' END || i AS txt FROM range(600) t(i)"
    )
    return con


def _ids(con: duckdb_sem.SemConnection) -> set[int]:
    return {int(r[0]) for r in con.sql(QUERY).fetchall()}


def test_no_cascade_unless_approximation_is_allowed(tmp_path: Path) -> None:
    con = _open(tmp_path, filter_helper=HELPER)
    lossless = con.explain_semantic(QUERY)
    assert "CASCADE" not in lossless and "calls≈600" in lossless
    assert "not taken" not in lossless  # not allowed: nothing was considered
    assert _ids(con) == APPLES
    stats = con.stats()
    assert stats.llm_calls == 600 and stats.helper_calls == 0 and stats.cascade_helper_rows == 0
    con.close()
    plain = _open(tmp_path / "udf", filter_helper=HELPER, approximate=True, optimize=False)
    assert _ids(plain) == APPLES and plain.stats().helper_calls == 0  # the UDF path: as written
    plain.close()


def test_model_helper_decides_the_pears_and_the_target_the_rest(tmp_path: Path) -> None:
    con = _open(tmp_path, filter_helper=HELPER, approximate=True)
    plan = con.explain_semantic(QUERY)
    assert "CASCADE helper test:" in plan and "accept >= inf" in plan
    assert "APPROXIMATE plan (duckdb_sem.approximate = on): sem_filter runs as a cascade" in plan
    assert (
        "sample precision 1.00 and recall 1.00, bounds precision >= 1.00 and recall >= 0.90 "
        "at confidence 0.90 (targets 0.90/0.90)"
    ) in plan
    # the cost model counts the saving: the target answers the SEU samples and the helper's
    # undecided rows, 600 x (0.05 + 0.95 x (1 - the helper's share)), not 600
    share = float(plan.split("the helper decides ")[1].split("%")[0]) / 100
    calls = int(plan.split("CASCADE")[1].split("calls≈")[1].split()[0].replace(",", ""))
    assert calls == round(600 * (0.05 + 0.95 * (1 - share))) and calls < 600
    assert "estimated: calls≈" + f"{calls:,}" in plan  # the summary line uses it too
    assert _ids(con) == APPLES  # the helper only rejected pears, which the target rejects too
    stats = con.stats()
    assert stats.helper_calls >= 600 and stats.cascade_helper_rows > 150
    assert stats.physical_calls < 0.75 * 600  # pears (a third) never reach the target
    con.close()


def test_a_lower_precision_target_lets_the_helper_pass_plums(tmp_path: Path) -> None:
    con = _open(tmp_path, filter_helper=HELPER, approximate=True)
    con.execute("SET duckdb_sem.filter_precision = 0.3")
    assert con.sql("SHOW duckdb_sem.filter_precision").fetchall() == [("0.3",)]
    got = _ids(con)
    # green apples pass: precision 0.5 of the target's answers, and its bound (on 100 rows at
    # 90%) over 0.3; a target of 0.4 is over that bound, and the target answers them
    assert got > APPLES
    assert len(APPLES) / len(got) >= 0.3
    assert con.stats().physical_calls < 0.5 * 600  # the first SEUs, on fewer labels, ask more
    for bad, message in (
        ("SET duckdb_sem.filter_recall = 0", "filter_recall must be in \\(0, 1\\]"),
        ("SET duckdb_sem.filter_precision = high", "takes a number"),
    ):
        with pytest.raises(duckdb_sem.ConfigError, match=message):
            con.execute(bad)
    con.close()


def test_embedding_helper_and_small_tables(tmp_path: Path) -> None:
    con = _open(tmp_path, filter_helper="embed", approximate=True)
    plan = con.explain_semantic(QUERY)
    assert "CASCADE helper embed keyword-double:" in plan
    assert _ids(con) == APPLES
    assert con.stats().embed_calls > 0 and con.stats().physical_calls < 0.75 * 600
    small = QUERY.replace("FROM t", "FROM (SELECT * FROM t WHERE id < 300) t")
    declined = con.explain_semantic(small)
    assert "CASCADE" not in declined  # 300 rows: under the 400 worth a sample
    assert "approximate plans not taken:" in declined
    assert "300 rows, under the 400 a cascade needs: no cascade" in declined
    assert "not taken" not in con.explain_semantic(QUERY)  # taken: nothing to say
    con.close()


def test_bad_helper_and_targets_are_named(tmp_path: Path) -> None:
    with pytest.raises(duckdb_sem.ConfigError, match="filter_precision must be in"):
        duckdb_sem.connect(backend=TARGET, cache="off", filter_precision=1.5)
    con = _open(tmp_path, filter_helper="estimator", approximate=True)
    with pytest.raises(duckdb_sem.ConfigError, match="needs an estimator backend"):
        con.sql(QUERY).fetchall()
    con.close()


def test_relation_api_filter_is_cascaded_too(tmp_path: Path) -> None:
    con = _open(tmp_path, filter_helper=HELPER, approximate=True)
    rel = con.table("t").sem_filter("Is {txt} a ripe apple?")
    assert {int(r[0]) for r in rel.fetchall()} == APPLES
    stats = con.stats()
    assert stats.helper_calls >= 600 and stats.cascade_helper_rows > 150
    con.close()
