"""``sem_join(..., per_row := ...)``: the per-row rewrite of a pair decision gives the label
comparison of the per-row answers, asks N + M rows instead of N x M pairs, on the planned road
and the UDF road, shows in EXPLAIN SEMANTIC, and is refused where it does not apply. The
``test:?hash=0.5`` backend answers a decision from a hash of its column values alone, so the
expected answers are computed from the backend itself."""

from __future__ import annotations

import itertools

import pytest

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.errors import SemError
from duckdb_sem.llm.pairs import per_row_plan
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.llm.template import parse_template

LEFT = [f"left review {i}" for i in range(6)]
RIGHT = [f"right review {i}" for i in range(5)]
QUESTION = "Is this review positive? {text}"
OPPOSITE = (
    "SELECT l.id, r.id FROM l JOIN r ON sem_join('Do {l.text} and {r.text} reach opposite "
    f"verdicts?', per_row := '{QUESTION}') ORDER BY ALL"
)


def _open(*, optimize: bool = True) -> tuple[duckdb_sem.SemConnection, RuleBackend]:
    backend = RuleBackend(spec="test:?hash=0.5", hash_share=0.5)
    con = duckdb_sem.connect(backend=backend, optimize=optimize)
    for name, texts in (("l", LEFT), ("r", RIGHT)):
        con.execute(f"CREATE TABLE {name} (id INTEGER, text VARCHAR)")
        con.executemany(f"INSERT INTO {name} VALUES (?, ?)", list(enumerate(texts)))
    return con, backend


def _positive(backend: RuleBackend, text: str) -> bool:
    template = parse_template("Is this review positive? {0}")
    request = build_request(OperatorKind.FILTER, template.render([text]), template=template)
    return backend.decide(request.row, request)


def _expected(backend: RuleBackend, *, same: bool) -> list[tuple[int, int]]:
    return [
        (i, j)
        for (i, a), (j, b) in itertools.product(enumerate(LEFT), enumerate(RIGHT))
        if (_positive(backend, a) == _positive(backend, b)) == same
    ]


@pytest.mark.parametrize("optimize", [True, False])
def test_per_row_compares_labels_with_n_plus_m_calls(optimize: bool) -> None:
    con, backend = _open(optimize=optimize)
    expected = _expected(backend, same=False)
    assert 0 < len(expected) < len(LEFT) * len(RIGHT)  # the hash splits the rows
    query = OPPOSITE
    if not optimize:  # the UDF road, explicit form
        query = (
            "SELECT l.id, r.id FROM l JOIN r ON sem_join('Do {0} and {1} reach opposite "
            "verdicts?', l.text, r.text, per_row := 'Is this review positive? {0}') "
            "ORDER BY ALL"
        )
    assert con.sql(query).fetchall() == expected
    assert backend.calls == len(LEFT) + len(RIGHT)  # not len(LEFT) * len(RIGHT)
    con.close()


def test_same_is_read_from_the_template_or_given() -> None:
    con, backend = _open()
    same = con.sql(
        "SELECT l.id, r.id FROM l JOIN r ON sem_join('{l.text} and {r.text} reach the same "
        f"verdict', per_row := '{QUESTION}') ORDER BY ALL"
    ).fetchall()
    assert same == _expected(backend, same=True)
    given = con.sql(
        "SELECT l.id, r.id FROM l JOIN r ON sem_join('Compare {l.text} with {r.text}', "
        f"per_row := '{QUESTION}', per_row_match := 'same') ORDER BY ALL"
    ).fetchall()
    assert given == same
    con.close()


def test_nested_loop_without_the_option_asks_every_pair() -> None:
    con, backend = _open()
    con.sql(OPPOSITE.replace(f", per_row := '{QUESTION}'", "")).fetchall()
    assert backend.calls == len(LEFT) * len(RIGHT)
    con.close()


def test_explain_shows_the_rewrite_and_its_calls() -> None:
    con, _ = _open()
    con.execute("ANALYZE")  # no-op for the plan, rows come from the tables
    plan = con.explain_semantic(OPPOSITE)
    assert "per_row := 'Is this review positive? {text}'" in plan
    assert "APPROXIMATE rewrite (per_row :=, asked by the call)" in plan
    assert "are different" in plan
    calls = int(plan.split("SemJoin")[1].split("calls≈")[1].split()[0].replace(",", ""))
    assert calls <= len(LEFT) + len(RIGHT)
    assert "APPROXIMATE rewrite" not in con.explain_semantic(
        OPPOSITE.replace(f", per_row := '{QUESTION}'", "")
    )
    con.close()


@pytest.mark.parametrize("optimize", [True, False])
def test_the_option_is_refused_on_a_non_join(optimize: bool) -> None:
    con, _ = _open(optimize=optimize)
    with pytest.raises(SemError, match=r"per_row := .*applies only to sem_join"):
        con.sql(f"SELECT id FROM l WHERE sem_filter('{{0}} good', text, per_row := '{QUESTION}')")
    con.close()


def test_a_template_naming_no_comparison_needs_per_row_match() -> None:
    con, _ = _open()
    with pytest.raises(SemError, match="per_row_match := 'same'"):
        con.sql(
            "SELECT l.id FROM l JOIN r ON sem_join('Compare {l.text} with {r.text}', "
            f"per_row := '{QUESTION}')"
        ).fetchall()
    con.close()


def test_per_row_plan_checks_its_inputs() -> None:
    assert per_row_plan("{0} vs {1}: same?", "Good? {x}", None).question == "Good? {0}"
    with pytest.raises(SemError, match="exactly one field"):
        per_row_plan("{0} vs {1}: same?", "{a} and {b}", None)
    with pytest.raises(SemError, match="exactly two fields"):
        per_row_plan("{0} vs {1} vs {2}: same?", "Good? {x}", None)
    with pytest.raises(SemError, match="or 'different'"):
        per_row_plan("{0} vs {1}: same?", "Good? {x}", "equal")


def test_the_table_function_takes_the_option_too() -> None:
    con, backend = _open()
    got = con.sql(
        "SELECT * FROM sem_join('l', 'r', 'Do {l.text} and {r.text} reach opposite verdicts?', "
        f"per_row := '{QUESTION}')"
    ).fetchall()
    assert sorted((row[0], row[2]) for row in got) == _expected(backend, same=False)
    assert backend.calls == len(LEFT) + len(RIGHT)
    con.close()
