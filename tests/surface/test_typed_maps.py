"""ENUM, DATE and JSON ``sem_map`` outputs end to end, on both roads, with the rule backend."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.errors import OutputTypeError

TONE = "ENUM(''positive'', ''negative'')"
QUERY = (
    f"SELECT id, sem_map('Tone of {{text}}', '{TONE}') AS tone, "
    "sem_map('Release date of {text}', 'DATE') AS day, "
    "sem_map('Facts of {text}', 'JSON') AS facts, "
    f"sem_map('Sum up {{text}}', 'STRUCT(tone {TONE}, keyword VARCHAR, day DATE, facts JSON)') AS s, "
    "sem_map('Dates in {text}', 'DATE[]') AS days "
    "FROM r ORDER BY id"
)


def _connect(tmp_path: Path, backend: RuleBackend, *, optimize: bool) -> duckdb_sem.SemConnection:
    con = duckdb_sem.connect(backend=backend, cache=str(tmp_path / "c.sqlite"), optimize=optimize)
    con.execute(
        "CREATE TABLE r AS SELECT * FROM (VALUES (1, 'a positive, good film'), "
        "(2, 'negative and dull'), (3, NULL)) t(id, text)"
    )
    return con


@pytest.mark.parametrize("optimize", [True, False], ids=["planned", "udf"])
def test_new_types_on_both_roads(tmp_path: Path, optimize: bool) -> None:
    rules = RuleBackend()
    con = _connect(tmp_path, rules, optimize=optimize)
    rel = con.sql(QUERY)
    assert [str(t) for t in rel.types] == [
        "INTEGER", "VARCHAR", "DATE", "VARCHAR",
        'STRUCT(tone VARCHAR, keyword VARCHAR, "day" DATE, facts VARCHAR)', "DATE[]",
    ]  # fmt: skip
    rows = rel.fetchall()
    assert [r[1] for r in rows] == ["positive", "negative", None]  # the label a row names
    first = rows[0]
    assert isinstance(first[2], datetime.date) and isinstance(first[5][0], datetime.date)
    assert json.loads(first[3])["words"] == ["Facts", "of", "a"]
    assert first[4]["tone"] == "positive" and isinstance(first[4]["day"], datetime.date)
    assert isinstance(json.loads(first[4]["facts"]), dict)
    assert rows[2][1:] == (None, None, None, None, None)  # a NULL row asks nothing
    assert con.stats().null_outputs == 0
    # a second connection reads every answer from the cache file: dates come back as dates
    calls = rules.calls
    con.close()
    again = _connect(tmp_path, rules, optimize=optimize)
    assert again.sql(QUERY).fetchall() == rows and rules.calls == calls
    again.close()


def test_an_enum_map_is_a_choice_among_its_labels(tmp_path: Path) -> None:
    con = _connect(tmp_path, RuleBackend(), optimize=True)
    explain = con.sql(f"EXPLAIN SEMANTIC VERBOSE SELECT sem_map('{{text}}', '{TONE}') FROM r")
    assert "classify ENUM('positive', 'negative') one of ['positive', 'negative']" in str(
        explain.fetchall()
    )
    con.close()


@pytest.mark.parametrize("optimize", [True, False], ids=["planned", "udf"])
@pytest.mark.parametrize(
    ("sql_type", "message"),
    [
        ("ENUM(''positive'')", "at least two labels"),
        ("STRUCT(t ENUM(''a'', ''a''))", "distinct"),
        ("ENUM(positive, negative)", "quoted strings"),
        ("TIMESTAMP", "unsupported output type"),
    ],
)
def test_bad_types_fail_before_any_call(
    tmp_path: Path, optimize: bool, sql_type: str, message: str
) -> None:
    rules = RuleBackend()
    con = _connect(tmp_path, rules, optimize=optimize)
    with pytest.raises(OutputTypeError, match=message):
        con.sql(f"SELECT sem_map('{{text}}', '{sql_type}') FROM r").fetchall()
    assert rules.calls == 0
    con.close()
