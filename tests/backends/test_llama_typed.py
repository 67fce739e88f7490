"""Typed ``sem_map`` on the real embedded model (SmolLM2-135M alone, as in test_llama.py):
every supported type, over 20 held-out reviews, parses (no NULL for a non-NULL review); an ENUM
is scored among its labels, not generated.

This checks the grammars, not the answers: a 135M model's ratings and dates are poor, but
each is a value of its type. ``max_tokens := 24`` bounds the nested answers, so the run also
checks that an answer cut off mid-JSON is closed rather than NULL.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import duckdb_sem
from duckdb_sem.backends.llama import default_model_path
from duckdb_sem.backends.registry import create_backend

pytestmark = [pytest.mark.model, pytest.mark.slow]

HELD_OUT = Path(__file__).resolve().parent.parent / "data" / "rt_held_out.csv"
ROWS = 20
TONE = "ENUM(''positive'', ''negative'')"

CASES: list[tuple[str, str, Any]] = [
    ("INTEGER", "How many stars out of 5 would this critic give? Review: {text}",
     lambda v: isinstance(v, int)),
    ("DOUBLE", "Score this review from 0.0 (hated it) to 10.0 (loved it). Review: {text}",
     lambda v: isinstance(v, float)),
    ("BOOLEAN", "Did the critic like the movie? Review: {text}", lambda v: isinstance(v, bool)),
    ("DATE", "On what date might this review have been published? Review: {text}",
     lambda v: isinstance(v, datetime.date)),
    ("JSON", "Extract the opinions of this review as JSON. Review: {text}",
     lambda v: isinstance(json.loads(v), dict | list)),
    (TONE, "What is the tone of this review? Review: {text}",
     lambda v: v in ("positive", "negative")),
    (f"STRUCT(tone {TONE}, keyword VARCHAR)",
     "Give the tone and one key word of this review. Review: {text}",
     lambda v: v["tone"] in ("positive", "negative")),
    ("VARCHAR[]", "List up to three key words of this review. Review: {text}",
     lambda v: isinstance(v, list) and all(isinstance(w, str) for w in v)),
]  # fmt: skip


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb_sem.SemConnection]:
    backend = create_backend(f"llama:{default_model_path()}?threads=2")
    c = duckdb_sem.connect(backend=backend, cache="off")
    c.execute(
        f"CREATE TABLE r AS SELECT * FROM read_csv('{HELD_OUT}') ORDER BY movie, text LIMIT {ROWS}"
    )
    yield c
    c.close()


@pytest.mark.parametrize(("sql_type", "template", "check"), CASES, ids=[c[0] for c in CASES])
def test_typed_map_never_fails_to_parse(
    con: duckdb_sem.SemConnection, sql_type: str, template: str, check: Any
) -> None:
    rows = con.sql(
        f"SELECT text, sem_map('{template}', '{sql_type}', max_tokens := 24) AS v FROM r"
    ).fetchall()
    assert len(rows) == ROWS
    assert con.stats().null_outputs == 0
    failed = [(text[:40], v) for text, v in rows if v is None or not check(v)]
    assert not failed, failed
    if sql_type == TONE:  # a closed set: scored in one pass, one "token" a row
        assert con.stats().completion_tokens == ROWS
