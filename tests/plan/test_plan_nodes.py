from __future__ import annotations

import pytest

from duckdb_sem.errors import PlanError
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.plan import Join, Limit, Predicate, Scan, SemCall, SemFilter, SemJoin, SemMap

R = Scan("reviews", "r", ("id", "text"))
M = Scan("movies", "m", ("id", "title"))


def test_reads_and_produces() -> None:
    mapped = SemMap(R, SemCall("{0} topic", ("r.text",), OperatorKind.MAP), "topic")
    assert mapped.reads == {"r.text"}
    assert mapped.produces == {"topic"}
    assert mapped.attrs == {"r.id", "r.text", "topic"}
    assert mapped.row_wise and not Limit(mapped, 3).row_wise


def test_an_operator_cannot_read_what_its_input_lacks() -> None:
    with pytest.raises(PlanError, match="reads"):
        SemFilter(R, SemCall("{0} good", ("m.title",)))


def test_a_map_output_must_be_new() -> None:
    with pytest.raises(PlanError, match="already exists"):
        SemMap(R, SemCall("{0}", ("r.text",), OperatorKind.MAP), "r.id")


def test_join_sides_must_not_share_attributes() -> None:
    with pytest.raises(PlanError, match="share"):
        Join(R, R)


def test_semantic_join_reads_both_sides() -> None:
    with pytest.raises(PlanError, match="both sides"):
        SemJoin(R, M, SemCall("{0}", ("r.text",), OperatorKind.JOIN))
    join = SemJoin(R, M, SemCall("{0} about {1}", ("r.text", "m.title"), OperatorKind.JOIN))
    assert join.reads == {"r.text", "m.title"}


def test_templates_must_use_every_argument() -> None:
    with pytest.raises(PlanError, match="does not use"):
        SemCall("{0}", ("a", "b"))


def test_scan_filters_read_only_the_scan() -> None:
    with pytest.raises(PlanError, match="outside"):
        Scan("reviews", "r", ("id",), (Predicate.parse('"m.id" > 1', frozenset({"m.id"})),))


def test_nodes_are_values() -> None:
    a = SemFilter(R, SemCall("{0} good", ("r.text",)))
    b = SemFilter(Scan("reviews", "r", ("id", "text")), SemCall("{0} good", ("r.text",)))
    assert a == b and hash(a) == hash(b)
