"""Property tests over random operator trees (hypothesis).

- enumeration finds exactly the plans reachable by single rule-allowed swaps (brute force);
- the count never exceeds the paper's bound over the dependency forest;
- no plan is enumerated twice, and counting agrees with enumerating;
- every enumerated plan returns the same rows (executed with a deterministic backend).
"""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from optimizer_helpers import RuleEvaluator, brute_force

from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.optimizer import count_plans, enumerate_plans
from duckdb_sem.optimizer.bound import plan_bound
from duckdb_sem.plan import (
    Filter,
    Join,
    Node,
    Predicate,
    Project,
    ProjectItem,
    Scan,
    SemCall,
    SemFilter,
    SemJoin,
    SemMap,
    Sort,
    quote,
)
from duckdb_sem.plan.expressions import parse_sql
from duckdb_sem.runtime import execute_plan

COLUMNS = ("id", "k", "text")


@st.composite
def operator_trees(draw: st.DrawFn, max_ops: int = 4, max_tables: int = 3) -> Node:
    tables = draw(st.integers(1, max_tables))
    node: Node = Scan("t0", "t0", COLUMNS)
    for i in range(1, tables):
        right = Scan(f"t{i}", f"t{i}", COLUMNS)
        kind = draw(st.sampled_from(["equi", "cross", "sem"]))
        if kind == "equi":
            cond = Predicate.parse(
                f'"t{i - 1}.k" = "t{i}.k"', frozenset({f"t{i - 1}.k", f"t{i}.k"})
            )
            node = Join(node, right, cond)
        elif kind == "cross":
            node = Join(node, right)
        else:
            call = SemCall("{0} ~ {1}", (f"t{i - 1}.text", f"t{i}.text"), OperatorKind.JOIN)
            node = SemJoin(node, right, call)
    maps: list[str] = []
    for j in range(draw(st.integers(0, max_ops))):
        what = draw(st.sampled_from(["filter", "map", "on_map", "two", "rel"]))
        table = f"t{draw(st.integers(0, tables - 1))}.text"
        if what == "map":
            source = draw(st.sampled_from([table, *maps]))
            node = SemMap(node, SemCall(f"{{0}} m{j}", (source,), OperatorKind.MAP), f"m{j}")
            maps.append(f"m{j}")
        elif what == "on_map" and maps:
            node = SemFilter(node, SemCall(f"{{0}} f{j}", (draw(st.sampled_from(maps)),)))
        elif what == "two" and tables > 1:
            node = SemFilter(node, SemCall(f"{{0}} {{1}} f{j}", ("t0.text", f"t{tables - 1}.text")))
        elif what == "rel" and maps:
            m = draw(st.sampled_from(maps))
            node = Filter(node, Predicate.parse(f"length({quote(m)}) > 12", frozenset({m})))
        else:
            node = SemFilter(node, SemCall(f"{{0}} f{j}", (table,)))
    items = tuple(ProjectItem.parse(quote(a), a, frozenset({a})) for a in sorted(node.attrs))
    project = Project(node, items)
    return Sort(project, tuple(parse_sql(quote(i.name)) for i in items))


FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(operator_trees())
def test_enumeration_equals_brute_force(plan: Node) -> None:
    space = enumerate_plans(plan, max_plans=100_000)
    assert space.pruning is None
    assert set(space.plans) == brute_force(plan)
    assert len(space.plans) == space.total == count_plans(plan)


@FAST
@given(operator_trees(max_ops=6))
def test_no_duplicates_and_the_paper_bound(plan: Node) -> None:
    space = enumerate_plans(plan, max_plans=100_000)
    assert len(set(space.plans)) == len(space.plans)
    assert plan in space.plans or any(isinstance(n, Filter) for n in plan.walk())
    assert space.total <= plan_bound(plan)


@FAST
@given(operator_trees(max_ops=7))
def test_pruning_keeps_the_space_small_and_valid(plan: Node) -> None:
    space = enumerate_plans(plan, max_plans=20)
    assert 1 <= len(space.plans) <= 20
    assert len(set(space.plans)) == len(space.plans)
    if space.total <= 20:
        assert space.pruning is None
    else:
        assert space.pruning is not None


@pytest.fixture(scope="module")
def db() -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    words = ["good", "bad", "fine", "great good", "meh", "so good"]
    for t in range(3):
        con.execute(
            f"CREATE TABLE t{t} AS SELECT range AS id, range % 3 AS k, "
            f"list_extract($1, (range * {t + 2}) % 6 + 1) || ' item ' || range AS text "
            "FROM range(6)",
            [words],
        )
    yield con
    con.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=operator_trees(max_ops=3))
def test_every_plan_returns_the_same_rows(db: duckdb.DuckDBPyConnection, plan: Node) -> None:
    space = enumerate_plans(plan, max_plans=100_000)
    sample = space.plans[:: max(1, len(space.plans) // 12)]
    evaluator = RuleEvaluator()
    expected = execute_plan(db, plan, evaluator).to_pylist()
    for other in sample:
        assert execute_plan(db, other, evaluator).to_pylist() == expected
