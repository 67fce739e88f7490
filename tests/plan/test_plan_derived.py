"""Derived tables in FROM and JOIN: planned as written, below the outer query's joins."""

from __future__ import annotations

import duckdb
import pytest

from duckdb_sem.errors import AmbiguousColumnError, PlanError, UnknownColumnError
from duckdb_sem.optimizer.choose import plan_key
from duckdb_sem.optimizer.enumerate import count_plans, enumerate_plans
from duckdb_sem.optimizer.explain import format_plan
from duckdb_sem.plan import Filter, Join, Node, Project, Scan, SemFilter, SemJoin, SemMap
from duckdb_sem.plan.build import build_plan

TABLES = {"reviews": ("id", "mid", "text"), "movies": ("id", "title")}


def build(sql: str) -> Node:
    return build_plan(sql, lambda table: TABLES[table])


def region(plan: Node) -> Node:
    assert isinstance(plan, Project)
    return plan.child


def test_a_filter_in_a_derived_table_sits_below_the_join() -> None:
    plan = build(
        "SELECT r.id, m.title FROM (SELECT id, mid, text FROM reviews "
        "WHERE id > 3 AND sem_filter('{text} good')) AS r JOIN movies m ON r.mid = m.id "
        "WHERE sem_filter('{m.title} great')"
    )
    assert format_plan(plan) == "\n".join(
        [
            'Project "r.id" AS id, "m.title" AS title',
            "  SemFilter sem_filter('{0} great', m.title)",
            '    Join ON ("r.mid" = "m.id")',
            "      SemFilter sem_filter('{0} good', r.text)",
            '        Scan reviews AS r WHERE "r.id" > 3',
            "      Scan movies AS m",
        ]
    )


def test_a_derived_table_on_either_side_of_a_semantic_join() -> None:
    plan = build(
        "SELECT r.id, m.title FROM reviews r JOIN "
        "(SELECT * FROM movies WHERE sem_filter('{title} great')) AS m "
        "ON sem_join('{r.text} is about {m.title}')"
    )
    join = region(plan)
    assert isinstance(join, SemJoin)
    assert isinstance(join.left, Scan)
    assert isinstance(join.right, SemFilter) and join.right.call.args == ("m.title",)
    assert isinstance(join.right.child, Scan) and join.right.child.alias == "m"


def test_map_in_a_derived_table_runs_before_the_outer_filter() -> None:
    plan = build(
        "SELECT id, topic FROM (SELECT id, text, sem_map('{text} topic') AS topic "
        "FROM reviews) AS reviews WHERE sem_filter('{text} good')"
    )
    sem = region(plan)
    assert isinstance(sem, SemFilter) and sem.call.args == ("reviews.text",)
    assert isinstance(sem.child, SemMap) and sem.child.output == "topic"
    assert isinstance(plan, Project)
    assert [(i.sql, i.name) for i in plan.items] == [('"reviews.id"', "id"), ('"topic"', "topic")]
    flat = build(
        "SELECT id, sem_map('{text} topic') AS topic FROM reviews WHERE sem_filter('{text} good')"
    )
    assert plan_key(region(flat)) != plan_key(sem)  # as written: filter first, map above it


def test_inside_a_derived_table_filters_then_maps_then_what_reads_the_maps() -> None:
    plan = build(
        "SELECT r.id FROM (SELECT id, sem_map('{text} topic') AS topic FROM reviews "
        "WHERE sem_filter('{0} is sport', topic) AND topic <> 'x' AND sem_filter('{text} good')) "
        "AS r, movies m WHERE r.id = m.id AND r.topic <> 'y'"
    )
    late = region(plan)
    assert isinstance(late, Filter) and late.predicate.sql == "\"topic\" <> 'y'"
    join = late.child
    assert isinstance(join, Join) and join.condition is not None
    chain = join.left
    labels = []
    while not isinstance(chain, Scan):
        labels.append(chain.label().split()[0])
        chain = chain.children[0]
    assert labels == ["Filter", "SemFilter", "SemMap", "SemFilter"]


def test_outer_predicates_on_a_derived_table_go_into_its_scan() -> None:
    plan = build(
        "SELECT r.id FROM (SELECT id, text FROM reviews WHERE sem_filter('{text} good')) AS r "
        "WHERE r.id < 10"
    )
    sem = region(plan)
    assert isinstance(sem, SemFilter) and isinstance(sem.child, Scan)
    assert [p.sql for p in sem.child.filters] == ['"r.id" < 10']


def test_renamed_columns_bind_to_the_table_column() -> None:
    plan = build(
        "SELECT r.body, ident FROM (SELECT id AS ident, text AS body FROM reviews x "
        "WHERE x.id > 2 AND sem_filter('{x.text} good')) r "
        "WHERE sem_filter('{body} long') AND ident < 9"
    )
    assert isinstance(plan, Project)
    assert [(i.sql, i.name) for i in plan.items] == [('"r.text"', "body"), ('"r.id"', "ident")]
    outer = plan.child
    assert isinstance(outer, SemFilter) and outer.call.args == ("r.text",)
    inner = outer.child
    assert isinstance(inner, SemFilter) and inner.call.args == ("r.text",)
    assert isinstance(inner.child, Scan)
    assert [p.sql for p in inner.child.filters] == ['"r.id" > 2', '"r.id" < 9']


def test_star_shows_the_table_columns_and_a_select_list_hides_the_others() -> None:
    plan = build("SELECT * FROM (SELECT * FROM reviews) AS r WHERE sem_filter('{text} good')")
    assert isinstance(plan, Project)
    assert [i.name for i in plan.items] == ["id", "mid", "text"]
    plan = build("SELECT * FROM (SELECT id AS k FROM reviews) r WHERE sem_filter('{r.k} good')")
    scan = region(plan).children[0]
    assert isinstance(scan, Scan) and scan.columns == TABLES["reviews"]  # the scan reads all
    for hidden in ("text", "r.text", "r.id"):  # the query sees only the select list
        with pytest.raises(UnknownColumnError, match=r"available: r\.k"):
            build(
                f"SELECT * FROM (SELECT id AS k FROM reviews) r WHERE sem_filter('{{{hidden}}} x')"
            )


def test_select_list_of_a_derived_table_with_a_star() -> None:
    plan = build(
        "SELECT * FROM (SELECT id AS k FROM reviews) r, movies m WHERE sem_filter('{m.title} x')"
    )
    assert isinstance(plan, Project)
    assert [(i.sql, i.name) for i in plan.items] == [
        ('"r.id"', "k"),
        ('"m.id"', "id"),
        ('"m.title"', "title"),
    ]


def test_binding_errors_in_and_around_derived_tables() -> None:
    with pytest.raises(AmbiguousColumnError, match=r"\{r\.id\} or \{m\.id\}"):
        build("SELECT 1 FROM (SELECT id FROM reviews) r, movies m WHERE sem_filter('{id} x')")
    with pytest.raises(UnknownColumnError, match="reviews"):  # inside, the table's name is x
        build("SELECT * FROM (SELECT id FROM reviews x WHERE reviews.id > 1) r "
              "WHERE sem_filter('{id} x')")  # fmt: skip


def test_map_names_stay_unique_across_derived_tables() -> None:
    plan = build(
        "SELECT a.t AS at, b.t AS bt, sem_map('{a.text} tone') AS t "
        "FROM (SELECT id, text, sem_map('{text} topic') AS t FROM reviews) a "
        "JOIN (SELECT id, sem_map('{text} topic') AS t FROM reviews) b ON a.id = b.id"
    )
    outputs = [node.output for node in plan.walk() if isinstance(node, SemMap)]
    assert len(set(outputs)) == 3 and "t" in outputs
    assert isinstance(plan, Project)
    assert [i.name for i in plan.items] == ["at", "bt", "t"]


def test_a_semantic_join_reading_a_derived_map_stays_above_the_join() -> None:
    plan = build(
        "SELECT r.id FROM (SELECT id, sem_map('{text} topic') AS topic FROM reviews) r, movies m "
        "WHERE sem_join('{r.topic} is the genre of {m.title}')"
    )
    top = region(plan)
    assert isinstance(top, SemFilter) and isinstance(top.child, Join)
    assert len(enumerate_plans(plan).plans) == count_plans(plan) == 2


FLAT_AND_DERIVED = [
    (
        "SELECT r.id, m.title FROM reviews r JOIN movies m ON sem_join('{r.text} on {m.title}') "
        "WHERE r.id > 3 AND sem_filter('{r.text} good')",
        "SELECT r.id, m.title FROM (SELECT id, text FROM reviews WHERE id > 3 "
        "AND sem_filter('{text} good')) AS r JOIN movies m ON sem_join('{r.text} on {m.title}')",
    ),
    (
        "SELECT id, sem_map('{text} topic') AS topic FROM reviews "
        "WHERE sem_filter('{text} good') AND sem_filter('{0} long', topic)",
        "SELECT id, topic FROM (SELECT id, text, sem_map('{text} topic') AS topic FROM reviews) "
        "AS reviews WHERE sem_filter('{0} long', topic) AND sem_filter('{text} good')",
    ),
]


@pytest.mark.parametrize(("flat", "derived"), FLAT_AND_DERIVED)
def test_the_as_written_plan_is_one_of_the_flat_query_plans(flat: str, derived: str) -> None:
    written, plain = build(derived), build(flat)
    assert plan_key(written) != plan_key(plain)
    space = {plan_key(p) for p in enumerate_plans(plain).plans}
    assert plan_key(written) in space
    assert {plan_key(p) for p in enumerate_plans(written).plans} == space
    assert count_plans(written) == count_plans(plain) == len(space)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT * FROM (SELECT * FROM reviews) WHERE sem_filter('{text} x')", "alias"),
        ("SELECT * FROM (SELECT sem_map('{text} t') FROM reviews) s WHERE sem_filter('{id} x')",
         "select list"),
        ("SELECT * FROM (SELECT sem_agg('{text} t') AS a FROM reviews) s "
         "WHERE sem_filter('{a} x')", "sem_agg"),
        ("SELECT * FROM (SELECT r.id FROM reviews r, movies m WHERE sem_filter('{r.text} x')) s",
         "a join"),
    ],
)  # fmt: skip
def test_unsupported_semantic_subqueries_raise_a_clear_plan_error(sql: str, message: str) -> None:
    """A semantic subquery of a shape the builder does not plan (the statement front end then
    computes it on its own as a unit: ``plan.statement.extract_units``)."""
    with pytest.raises(PlanError, match=message):
        build(sql)


@pytest.mark.parametrize(
    "inner",
    [
        "SELECT r.id FROM reviews r JOIN movies m ON r.mid = m.id",
        "SELECT r.id FROM reviews r, movies m",
        "SELECT mid AS id FROM reviews GROUP BY mid",
        "SELECT count(*) AS id FROM reviews",
        "SELECT DISTINCT mid AS id FROM reviews",
        "SELECT id FROM reviews ORDER BY id",
        "SELECT id FROM reviews LIMIT 3",
        "SELECT id FROM (SELECT id FROM reviews) a",
        "SELECT id FROM reviews WHERE id IN (SELECT id FROM movies)",
        "SELECT id, row_number() OVER () AS k FROM reviews",
        "SELECT id + 1 AS id FROM reviews",
        "SELECT id FROM reviews UNION SELECT id FROM movies",
    ],
)
def test_a_relational_subquery_of_any_shape_is_a_source_duckdb_computes(inner: str) -> None:
    """Without a semantic call inside, a subquery the builder cannot flatten is scanned as
    a whole (as a view is), and the outer semantic operators sit above its scan."""
    con = duckdb.connect()
    con.execute("CREATE TABLE reviews (id INT, mid INT, text VARCHAR)")
    con.execute("CREATE TABLE movies (id INT, title VARCHAR)")
    sql = f"SELECT * FROM ({inner}) s WHERE sem_filter('{{id}} x')"
    plan = build_plan(sql, lambda table: con.sql(f"SELECT * FROM {table} LIMIT 0").columns)
    node = region(plan)
    assert isinstance(node, SemFilter) and node.call.args == ("s.id",)
    assert isinstance(node.child, Scan) and node.child.alias == "s"
    assert node.child.table.startswith("(") and "reviews" in node.child.table
    con.sql(f"SELECT * FROM {node.child.table} AS s LIMIT 0")  # DuckDB reads it as written


def test_column_aliases_of_a_relational_subquery_are_kept() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE reviews (id INT, mid INT, text VARCHAR)")
    sql = "SELECT * FROM (SELECT id FROM reviews) s(k) WHERE sem_filter('{k} x')"
    plan = build_plan(sql, lambda table: con.sql(f"SELECT * FROM {table} LIMIT 0").columns)
    node = region(plan)
    assert isinstance(node, SemFilter) and node.call.args == ("s.k",)
