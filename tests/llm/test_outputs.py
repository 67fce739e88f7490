from __future__ import annotations

import contextlib

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from duckdb_sem.errors import OutputTypeError
from duckdb_sem.llm.outputs import OutputParseError, parse_type


@pytest.mark.parametrize(
    ("sql", "canonical", "arrow"),
    [
        ("integer", "INTEGER", pa.int32()),
        ("INT", "INTEGER", pa.int32()),
        ("BIGINT", "BIGINT", pa.int64()),
        ("double", "DOUBLE", pa.float64()),
        ("BOOLEAN", "BOOLEAN", pa.bool_()),
        ("VARCHAR", "VARCHAR", pa.string()),
        ("VARCHAR[]", "VARCHAR[]", pa.list_(pa.string())),
        (
            "STRUCT(a INTEGER, b VARCHAR[])",
            'STRUCT("a" INTEGER, "b" VARCHAR[])',
            pa.struct([("a", pa.int32()), ("b", pa.list_(pa.string()))]),
        ),
    ],
)
def test_supported_types(sql: str, canonical: str, arrow: pa.DataType) -> None:
    spec = parse_type(sql)
    assert spec.sql == canonical and spec.arrow == arrow


@pytest.mark.parametrize(
    "sql", ["DATE", "MAP(VARCHAR, INTEGER)", "", "  ", "STRUCT(a)", "STRUCT(a INT, a INT)", "FOO("]
)
def test_unsupported_types_are_bind_errors(sql: str) -> None:
    with pytest.raises(OutputTypeError):
        parse_type(sql)


@pytest.mark.parametrize(
    ("sql", "text", "value"),
    [
        ("INTEGER", " 42 ", 42),
        ("INTEGER", "The answer is 7.", 7),
        ("INTEGER", "1,200", 1200),
        ("DOUBLE", "about 3.5 stars", 3.5),
        ("BOOLEAN", "Yes, it is", True),
        ("BOOLEAN", "false", False),
        ("VARCHAR[]", 'Sure: ["a", "b"]', ["a", "b"]),
        ("INTEGER[]", "[1, 2]", [1, 2]),
        (
            "STRUCT(year INTEGER, tags VARCHAR[])",
            '{"Year": 1999, "tags": ["x"]}',
            {"year": 1999, "tags": ["x"]},
        ),
        ("STRUCT(a INTEGER, b VARCHAR)", '{"a": 1}', {"a": 1, "b": None}),
    ],
)
def test_parse(sql: str, text: str, value: object) -> None:
    assert parse_type(sql).parse(text) == value


@pytest.mark.parametrize(
    ("sql", "text"),
    [
        ("INTEGER", "many"),
        ("INTEGER", "2.5"),
        ("INTEGER", "99999999999"),
        ("BOOLEAN", "perhaps"),
        ("VARCHAR[]", "a, b"),
        ("VARCHAR[]", '{"a": 1}'),
        ("STRUCT(a INTEGER)", "[1]"),
        ("STRUCT(a INTEGER)", "{oops"),
    ],
)
def test_malformed_output_raises_parse_error(sql: str, text: str) -> None:
    with pytest.raises(OutputParseError):
        parse_type(sql).parse(text)


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_integers_round_trip(n: int) -> None:
    assert parse_type("INTEGER").parse(str(n)) == n


@given(st.text())
def test_parse_never_raises_anything_but_parse_error(text: str) -> None:
    for sql in ("INTEGER", "DOUBLE", "BOOLEAN", "VARCHAR[]", "STRUCT(a INTEGER, b VARCHAR[])"):
        with contextlib.suppress(OutputParseError):
            parse_type(sql).parse(text)
