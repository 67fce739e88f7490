"""One resolver binds ``{col}`` for every entry: the same field gets the same error whichever
way the query came in (planned SQL, the UDF path, the relation API, a table function), and a
statement is parsed by sqlglot once on its way to a plan."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import duckdb_sem
from duckdb_sem.errors import AmbiguousColumnError, BindError, UnknownColumnError
from duckdb_sem.plan.fields import Name, resolve

SCHEMA = """
CREATE TABLE r AS SELECT range AS id, 'review ' || range AS text, range % 3 AS mid FROM range(12);
CREATE TABLE m AS SELECT range AS id, 'movie ' || range AS text FROM range(3);
"""


@pytest.fixture(params=[True, False], ids=["planned", "udf"])
def con(request: pytest.FixtureRequest) -> Iterator[duckdb_sem.SemConnection]:
    c = duckdb_sem.connect(backend="test:", cache="off", optimize=request.param)
    c.execute(SCHEMA)
    yield c
    c.close()


def _error(con: duckdb_sem.SemConnection, sql: str) -> BindError:
    with pytest.raises(BindError) as info:
        con.sql(sql).fetchall()
    assert con.stats().llm_calls == 0  # bound before any LLM call
    return info.value


def test_unknown_and_ambiguous_fields_read_the_same_on_both_roads() -> None:
    messages: dict[str, set[str]] = {"unknown": set(), "ambiguous": set(), "alias": set()}
    for optimize in (True, False):
        c = duckdb_sem.connect(backend="test:", cache="off", optimize=optimize)
        c.execute(SCHEMA)
        unknown = _error(c, "SELECT id FROM r WHERE sem_filter('Is {nope} good?')")
        ambiguous = _error(c, "SELECT r.id FROM r JOIN m ON r.mid = m.id "
                              "WHERE sem_filter('{text} is good')")  # fmt: skip
        alias = _error(c, "SELECT r.id FROM r WHERE sem_filter('{x.text} is good')")
        assert isinstance(unknown, UnknownColumnError)
        assert isinstance(ambiguous, AmbiguousColumnError)
        assert isinstance(alias, UnknownColumnError)
        messages["unknown"].add(str(unknown))
        messages["ambiguous"].add(str(ambiguous))
        messages["alias"].add(str(alias))
        c.close()
    assert messages["unknown"] == {
        "template 'Is {nope} good?': unknown column {nope}; available: r.id, r.text, r.mid"
    }
    assert messages["ambiguous"] == {
        "template '{text} is good': {text} is ambiguous; write {r.text} or {m.text}"
    }
    assert messages["alias"] == {
        "template '{x.text} is good': no table or alias 'x' in scope (have: r)"
    }


def test_relation_api_and_table_functions_use_the_same_rules(
    con: duckdb_sem.SemConnection,
) -> None:
    with pytest.raises(UnknownColumnError, match=r"unknown column \{nope\}; available: .*text"):
        con.table("r").sem_filter("Is {nope} good?")
    with pytest.raises(UnknownColumnError, match=r"no table or alias 'x' in scope"):
        con.sql("SELECT * FROM sem_topk('r', 2, '{x.text} is good')").fetchall()
    with pytest.raises(AmbiguousColumnError, match=r"\{text\} is ambiguous; write \{l\.text\}"):
        con.sql("SELECT * FROM sem_join('r', 'm', '{text} matches {r.text}')").fetchall()


def test_qualified_fields_bind_on_both_roads(con: duckdb_sem.SemConnection) -> None:
    rows = con.sql(
        "SELECT r.id, sem_map('{r.text} in a word') AS gist FROM r JOIN m ON r.mid = m.id "
        "WHERE sem_filter('{r.text} and {m.text} agree') ORDER BY r.id"
    ).fetchall()
    assert [row[0] for row in rows] == sorted(row[0] for row in rows)
    assert all(isinstance(row[1], str) for row in rows)
    assert con.stats().llm_calls > 0


def test_resolver_rules() -> None:
    names = [Name("text", "a.text", ("a", "l")), Name("text", "b.text", ("b", "r"))]
    assert resolve("l.text", names, where="t") == "a.text"
    assert resolve('"b"."TEXT"', names, where="t") == "b.text"
    late = [Name("gist", "gist")]
    assert resolve("gist", names, where="t", late=late) == "gist"
    with pytest.raises(UnknownColumnError, match=r"'b.gist'"):  # late names take no qualifier
        resolve("b.gist", names, where="t", late=late, template=False)
    # a late name never makes a column ambiguous
    assert resolve("a.text", names, where="t", late=[Name("text", "x")]) == "a.text"


def test_a_planned_statement_is_parsed_once(
    con: duckdb_sem.SemConnection, sqlglot_parses: list[int]
) -> None:
    sql = "SELECT id FROM r WHERE id > ? AND sem_filter('Is {text} good?') ORDER BY id LIMIT 3"
    rows = con.sql(sql, params=[2]).fetchall()
    assert [row[0] for row in rows] == sorted(row[0] for row in rows)[:3]
    assert all(row[0] > 2 for row in rows)
    assert sqlglot_parses[0] == 1
