from __future__ import annotations

from collections.abc import Sequence

import duckdb
import pytest

from duckdb_sem.errors import (
    AmbiguousColumnError,
    BindError,
    OutputTypeError,
    TemplateError,
    UnknownColumnError,
)
from duckdb_sem.surface.bind import bind_sql, has_semantic_call, typed_map_function


@pytest.fixture
def describe() -> object:
    db = duckdb.connect()
    db.execute("CREATE TABLE reviews (id INTEGER, text VARCHAR, movie VARCHAR)")
    db.execute("CREATE TABLE plots (movie VARCHAR, plot VARCHAR)")

    def run(sql: str) -> Sequence[str]:
        return [d[0] for d in db.execute(sql).description or []]

    return run


def test_sql_without_semantic_calls_is_untouched(describe: object) -> None:
    sql = "select  1 AS x -- comment kept"
    bound = bind_sql(sql, describe)  # type: ignore[arg-type]
    assert bound.sql == sql and not bound.semantic


def test_named_fields_become_positional(describe: object) -> None:
    bound = bind_sql("SELECT id FROM reviews r WHERE sem_filter('{text} is {{good}}')", describe)  # type: ignore[arg-type]
    assert 'sem_filter(\'{0} is {{good}}\', "r"."text")' in bound.sql


def test_join_fields_bind_to_each_side(describe: object) -> None:
    bound = bind_sql(
        "SELECT * FROM reviews r JOIN plots p ON sem_join('{r.text} is about {plot}')",
        describe,  # type: ignore[arg-type]
    )
    assert 'sem_join(\'{0} is about {1}\', "r"."text", "p"."plot")' in bound.sql


def test_cte_and_subquery_sources(describe: object) -> None:
    bound = bind_sql(
        "WITH c AS (SELECT text AS body FROM reviews) "
        "SELECT * FROM c, (SELECT plot FROM plots) s WHERE sem_filter('{body} / {s.plot}')",
        describe,  # type: ignore[arg-type]
    )
    assert 'sem_filter(\'{0} / {1}\', "c"."body", "s"."plot")' in bound.sql


def test_typed_map_calls_the_typed_function(describe: object) -> None:
    bound = bind_sql("SELECT sem_map('{text}', 'VARCHAR[]') FROM reviews", describe)  # type: ignore[arg-type]
    assert "__sem_map_varchar_list(" in bound.sql
    assert [t.sql for t in bound.typed_maps] == ["VARCHAR[]"]


def test_new_types_get_their_own_functions(describe: object) -> None:
    sql = (
        "SELECT sem_map('{text}', 'DATE'), sem_map('{text}', 'DATE[]'), sem_map('{text}', 'JSON'),"
        " sem_map('{text}', 'ENUM(''a b'', ''c'')'), sem_map('{text}', 'ENUM(''a'', ''b c'')')"
        " FROM reviews"
    )
    bound = bind_sql(sql, describe)  # type: ignore[arg-type]
    names = [typed_map_function(t) for t in bound.typed_maps]
    assert [t.sql for t in bound.typed_maps] == [
        "DATE", "DATE[]", "JSON", "ENUM('a b', 'c')", "ENUM('a', 'b c')",
    ]  # fmt: skip
    assert names[:3] == ["__sem_map_date", "__sem_map_date_list", "__sem_map_json"]
    assert len(set(names)) == 5 and all(f"{name}(" in bound.sql for name in names)


def test_varchar_map_stays_plain(describe: object) -> None:
    bound = bind_sql("SELECT sem_map('{text}', 'VARCHAR') FROM reviews", describe)  # type: ignore[arg-type]
    assert 'sem_map(\'{0}\', "reviews"."text")' in bound.sql and not bound.typed_maps


def test_explicit_form_is_kept(describe: object) -> None:
    sql = "SELECT sem_filter('{0} ok', text) FROM reviews"
    assert bind_sql(sql, describe).sql == sql  # type: ignore[arg-type]


def test_explicit_form_with_type(describe: object) -> None:
    bound = bind_sql("SELECT sem_map('{0} n', text, 'INTEGER') FROM reviews", describe)  # type: ignore[arg-type]
    assert "__sem_map_integer('{0} n', [CAST(text AS TEXT)])" in bound.sql


@pytest.mark.parametrize(
    ("sql", "error", "message"),
    [
        ("SELECT sem_filter('{nope}') FROM reviews", UnknownColumnError, "available: reviews.id"),
        ("SELECT sem_filter('{x.text}') FROM reviews", UnknownColumnError, "no table or alias"),
        (
            "SELECT * FROM reviews r, plots p WHERE sem_join('{movie}')",
            AmbiguousColumnError,
            r"\{r.movie\} or \{p.movie\}",
        ),
        ("SELECT sem_filter('') FROM reviews", TemplateError, "empty prompt template"),
        ("SELECT sem_filter(text) FROM reviews", TemplateError, "string literal"),
        ("SELECT sem_filter('no field') FROM reviews", TemplateError, "names no column"),
        ("SELECT sem_filter('{0} {1}', text) FROM reviews", TemplateError, "position"),
        (
            "SELECT sem_map('{text}', 'TIMESTAMP') FROM reviews",
            OutputTypeError,
            "unsupported output type",
        ),
        (
            "SELECT sem_map('{text}', 'ENUM(''pos'')') FROM reviews",
            OutputTypeError,
            "at least two labels",
        ),
        (
            "SELECT sem_map('{text}', 'ENUM(pos, neg)') FROM reviews",
            OutputTypeError,
            "quoted strings",
        ),
        (
            "SELECT sem_map('{text}', 'STRUCT(t ENUM(''a'', ''a''))') FROM reviews",
            OutputTypeError,
            "distinct",
        ),
        ("SELECT sem_map('{text}', 'STRUCT(a)') FROM reviews", OutputTypeError, "name and a type"),
        ("SELECT sem_filter('{text}')", BindError, "FROM clause"),
        ("SELECT sem_filter('{text}') FROM missing_table", BindError, "missing_table"),
        ("SELECT sem_filter('{text}', text) FROM reviews", BindError, "no extra arguments"),
    ],
)
def test_binding_errors(describe: object, sql: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        bind_sql(sql, describe)  # type: ignore[arg-type]


def test_quick_detection() -> None:
    assert has_semantic_call("select SEM_FILTER ('x')")
    assert not has_semantic_call("select semantic_filter('x')")


def test_field_may_name_a_select_alias(describe: object) -> None:
    bound = bind_sql(
        "SELECT sem_map('{text}') AS gist FROM reviews WHERE sem_filter('{gist} is short')",
        describe,  # type: ignore[arg-type]
    )
    assert "sem_filter('{0} is short', \"gist\")" in bound.sql


def test_a_call_cannot_read_its_own_alias(describe: object) -> None:
    with pytest.raises(UnknownColumnError, match=r"unknown column \{gist\}"):
        bind_sql("SELECT sem_map('{gist}') AS gist FROM reviews", describe)  # type: ignore[arg-type]
