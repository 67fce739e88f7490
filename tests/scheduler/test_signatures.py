"""Signatures: any field that changes the answer changes them; row order and source do not."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import (
    DecodingParams,
    LLMRequest,
    OperatorKind,
    OutputSpec,
    RowTemplate,
    Task,
    signatures,
)
from duckdb_sem.scheduler.signatures import batch_signature, input_signature, operator_signature

text = st.text(max_size=30)
requests = st.builds(
    LLMRequest,
    operator=st.sampled_from(OperatorKind),
    prefix=text,
    row=text,
    output=st.builds(
        OutputSpec,
        task=st.sampled_from([Task.DECIDE, Task.GENERATE]),
        sql_type=st.sampled_from(["VARCHAR", "INTEGER", "BOOLEAN"]),
    )
    | st.builds(
        OutputSpec,
        task=st.just(Task.CLASSIFY),
        sql_type=st.just("VARCHAR"),
        labels=st.lists(text, min_size=2, max_size=3, unique=True).map(tuple),
    ),
    params=st.builds(
        DecodingParams,
        max_tokens=st.integers(1, 512),
        temperature=st.floats(0, 2, allow_nan=False),
        seed=st.integers(0, 10),
    ),
)


@given(requests, requests, st.sampled_from(["a", "b"]), st.sampled_from(["a", "b"]))
def test_request_signature_changes_iff_some_field_changes(
    r1: LLMRequest, r2: LLMRequest, b1: str, b2: str
) -> None:
    same = r1 == r2 and b1 == b2
    assert (r1.signature(b1) == r2.signature(b2)) == same


@given(
    requests,
    st.sampled_from(
        ["operator", "prefix", "row", "task", "sql_type", "max_tokens", "temperature", "seed"]
    ),
)
def test_changing_one_field_changes_the_signature(r: LLMRequest, name: str) -> None:
    if name == "operator":
        other = next(k for k in OperatorKind if k is not r.operator)
        changed = dataclasses.replace(r, operator=other)
    elif name in ("prefix", "row"):
        changed = dataclasses.replace(r, **{name: getattr(r, name) + "x"})
    elif name == "task":
        other_task = Task.GENERATE if r.output.task is Task.DECIDE else Task.DECIDE
        changed = dataclasses.replace(r, output=OutputSpec(other_task, r.output.sql_type))
    elif name == "sql_type":
        output = dataclasses.replace(r.output, sql_type=r.output.sql_type + "[]")
        changed = dataclasses.replace(r, output=output)
    else:
        value = getattr(r.params, name)
        changed = dataclasses.replace(r, params=dataclasses.replace(r.params, **{name: value + 1}))
    assert changed.signature("m") != r.signature("m")


@given(st.lists(text, min_size=1, max_size=8, unique=True), st.randoms())
def test_row_order_and_source_table_do_not_matter(rows: list[str], rnd) -> None:  # type: ignore[no-untyped-def]
    from duckdb_sem.llm.prompts import build_request

    shuffled = list(rows)
    rnd.shuffle(shuffled)
    a = {build_request(OperatorKind.FILTER, r).signature("m") for r in rows}
    b = {build_request(OperatorKind.FILTER, r).signature("m") for r in shuffled}
    assert a == b  # request level: the same rendered rows from anywhere match
    assert batch_signature("op", a) == batch_signature("op", list(b))
    assert input_signature(rows) == input_signature(shuffled)


@given(st.lists(text, min_size=1, max_size=4), text, text)
def test_operator_signature_covers_its_whole_upstream_subplan(
    rows: list[str], t1: str, t2: str
) -> None:
    scan = input_signature(rows)
    filt = operator_signature("m", "filter", t1, predecessors=[scan])
    mapped = operator_signature("m", "map", t2, output_type="VARCHAR", predecessors=[filt])
    again = operator_signature(
        "m",
        "map",
        t2,
        output_type="VARCHAR",
        predecessors=[operator_signature("m", "filter", t1, predecessors=[input_signature(rows)])],
    )
    assert mapped == again
    other_scan = input_signature([*rows, "extra row"])
    other = operator_signature(
        "m",
        "map",
        t2,
        output_type="VARCHAR",
        predecessors=[operator_signature("m", "filter", t1, predecessors=[other_scan])],
    )
    assert other != mapped  # different input anywhere upstream: a different subplan
    assert operator_signature("m2", "map", t2, output_type="VARCHAR", predecessors=[filt]) != mapped
    assert operator_signature("m", "map", t2, output_type="INTEGER", predecessors=[filt]) != mapped
    p = DecodingParams(max_tokens=7)
    assert (
        operator_signature("m", "map", t2, output_type="VARCHAR", params=p, predecessors=[filt])
        != mapped
    )


def test_signatures_of_many_equal_each_ones_own() -> None:
    base = build_request(OperatorKind.FILTER, "row a")
    rows = [
        base,
        dataclasses.replace(base, row="row b"),  # shares every part with the one before
        dataclasses.replace(base, row="row b", params=DecodingParams(max_tokens=9)),
        dataclasses.replace(base, row="row b", output=OutputSpec(Task.GENERATE, "VARCHAR")),
        dataclasses.replace(base, row="row b", prefix=base.prefix + " More."),
        dataclasses.replace(base, row="row b", operator=OperatorKind.JOIN),
        dataclasses.replace(base, row="row b", template=RowTemplate(("Is ", "?"), ("t",))),
        base,
    ]
    assert signatures(rows, "b") == [r.signature("b") for r in rows]
    assert len(set(signatures(rows, "b")[1:7])) == 6
