from __future__ import annotations

import pytest

from duckdb_sem.errors import AmbiguousColumnError, PlanError, UnknownColumnError
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.plan import Filter, Join, Project, Scan, SemAgg, SemFilter, SemJoin, SemMap
from duckdb_sem.plan.build import build_plan

TABLES = {"reviews": ("id", "mid", "text"), "movies": ("id", "title")}


def build(sql: str):  # type: ignore[no-untyped-def]
    return build_plan(sql, lambda table: TABLES[table])


def test_relational_predicates_go_into_scans_and_join_conditions() -> None:
    plan = build(
        "SELECT r.id FROM reviews r, movies m "
        "WHERE r.mid = m.id AND m.id > 3 AND sem_filter('{r.text} good')"
    )
    assert isinstance(plan, Project)
    sem = plan.child
    assert isinstance(sem, SemFilter) and sem.call.args == ("r.text",)
    join = sem.child
    assert isinstance(join, Join) and join.condition is not None
    assert join.condition.reads == {"r.mid", "m.id"}
    assert isinstance(join.right, Scan) and join.right.filters[0].sql == '"m.id" > 3'


def test_cross_join_with_a_semantic_predicate_becomes_a_semantic_join() -> None:
    plan = build("SELECT * FROM reviews r, movies m WHERE sem_join('{r.text} is about {m.title}')")
    assert isinstance(plan, Project)
    assert isinstance(plan.child, SemJoin)
    assert plan.child.call.kind is OperatorKind.JOIN
    assert [i.name for i in plan.items] == ["id", "mid", "text", "id", "title"]


def test_filters_on_a_map_output_go_above_the_map() -> None:
    plan = build(
        "SELECT sem_map('{text} topic') AS topic FROM reviews "
        "WHERE sem_filter('{0} is sport', topic) AND topic <> 'x'"
    )
    assert isinstance(plan, Project)
    assert isinstance(plan.child, Filter)
    assert isinstance(plan.child.child, SemFilter)
    assert isinstance(plan.child.child.child, SemMap)


def test_typed_map_and_positional_arguments() -> None:
    plan = build("SELECT sem_map('{0} stars', r.text, 'INTEGER') AS stars FROM reviews r")
    assert isinstance(plan, Project) and isinstance(plan.child, SemMap)
    assert plan.child.call.output_type == "INTEGER"
    assert plan.child.call.args == ("r.text",)


def test_sem_agg_over_groups() -> None:
    plan = build("SELECT mid, sem_agg('sum up {text}') AS s FROM reviews GROUP BY mid")
    assert isinstance(plan, SemAgg) and plan.output == "s"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM reviews r LEFT JOIN movies m ON r.mid = m.id WHERE sem_filter('{text} x')",
        "SELECT * FROM (SELECT * FROM reviews) WHERE sem_filter('{text} x')",
        "WITH c AS (SELECT * FROM reviews) SELECT * FROM c WHERE sem_filter('{text} x')",
    ],
)
def test_unsupported_shapes_raise_plan_error(sql: str) -> None:
    with pytest.raises(PlanError):
        build(sql)


def test_binding_errors() -> None:
    with pytest.raises(UnknownColumnError, match="nope"):
        build("SELECT * FROM reviews WHERE sem_filter('{nope} good')")
    with pytest.raises(AmbiguousColumnError, match=r"\{r\.id\} or \{m\.id\}"):
        build("SELECT * FROM reviews r, movies m WHERE sem_filter('{id} good')")
