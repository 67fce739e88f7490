from __future__ import annotations

import contextlib
import datetime
import json
import re

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from duckdb_sem.errors import OutputTypeError
from duckdb_sem.llm.outputs import OutputParseError, json_schema, parse_type, to_arrow
from duckdb_sem.llm.request import Completion


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
        ("date", "DATE", pa.date32()),
        ("JSON", "JSON", pa.string()),
        ("ENUM('pos','neg')", "ENUM('pos', 'neg')", pa.string()),
        ("ENUM('it''s', 'no')", "ENUM('it''s', 'no')", pa.string()),
        ("DATE[]", "DATE[]", pa.list_(pa.date32())),
        (
            "STRUCT(tone ENUM('positive','negative'), keyword VARCHAR)",
            "STRUCT(\"tone\" ENUM('positive', 'negative'), \"keyword\" VARCHAR)",
            pa.struct([("tone", pa.string()), ("keyword", pa.string())]),
        ),
    ],
)
def test_supported_types(sql: str, canonical: str, arrow: pa.DataType) -> None:
    spec = parse_type(sql)
    assert spec.sql == canonical and spec.arrow == arrow


@pytest.mark.parametrize(
    "sql",
    [
        "TIMESTAMP",
        "MAP(VARCHAR, INTEGER)",
        "",
        "  ",
        "STRUCT(a)",
        "STRUCT(a INT, a INT)",
        "FOO(",
        "ENUM('pos')",
        "ENUM()",
        "ENUM(pos, neg)",
        "ENUM(1, 2)",
        "ENUM('a', 'a')",
        "ENUM('', 'b')",
        "STRUCT(tone ENUM('only'))",
    ],
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
        ("DATE", "1999-03-31", datetime.date(1999, 3, 31)),
        ("DATE", '"2024-02-29"', datetime.date(2024, 2, 29)),
        ("DATE", "It opened on 2001-12-07T20:00.", datetime.date(2001, 12, 7)),
        ("JSON", '{"a": [1, 2]}', '{"a":[1,2]}'),
        ("JSON", 'Here it is: [1, {"b": null}] done', '[1,{"b":null}]'),
        ("JSON", '```json\n{"x": "é"}\n```', '{"x":"é"}'),
        ("JSON", "42", "42"),
        ("ENUM('positive', 'negative')", "negative", "negative"),
        ("ENUM('positive', 'negative')", ' "Positive". ', "positive"),
        ("ENUM('positive', 'negative')", "The tone is negative.", "negative"),
        (
            "STRUCT(tone ENUM('positive','negative'), d DATE, j JSON)",
            '{"tone": "POSITIVE", "d": "2020-01-02", "j": {"k": [1]}}',
            {"tone": "positive", "d": datetime.date(2020, 1, 2), "j": '{"k":[1]}'},
        ),
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
        ("DATE", "yesterday"),
        ("DATE", "2023-02-30"),
        ("DATE", "03/31/1999"),
        ("JSON", "not json"),
        ("JSON", '{"a": '),
        ("ENUM('positive', 'negative')", "neutral"),
        ("ENUM('positive', 'negative')", "positive or negative"),
        ("STRUCT(tone ENUM('positive','negative'))", '{"tone": "mixed"}'),
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
    for sql in ("INTEGER", "DOUBLE", "BOOLEAN", "VARCHAR[]", "STRUCT(a INTEGER, b VARCHAR[])",
                "DATE", "JSON", "ENUM('a', 'b')", "STRUCT(t ENUM('a', 'b'), d DATE, j JSON)"):  # fmt: skip
        with contextlib.suppress(OutputParseError):
            parse_type(sql).parse(text)


@given(st.dates(min_value=datetime.date(1000, 1, 1)))
def test_dates_round_trip(day: datetime.date) -> None:
    assert parse_type("DATE").parse(day.isoformat()) == day


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner)))  # fmt: skip
def test_json_answers_are_valid_json_of_the_same_value(value: object) -> None:
    text = parse_type("JSON").parse(json.dumps(value))
    assert json.loads(text) == value


def test_returned_columns_are_varchar_for_enum_and_json() -> None:
    spec = parse_type("STRUCT(tone ENUM('a', 'b'), j JSON, d DATE[], n INTEGER)")
    assert spec.column_sql == 'STRUCT("tone" VARCHAR, "j" VARCHAR, "d" DATE[], "n" INTEGER)'
    assert parse_type("ENUM('a', 'b')").column_sql == "VARCHAR"
    assert parse_type("JSON").column_sql == "VARCHAR"


def test_schemas_constrain_enum_date_and_json() -> None:
    enum = json_schema(parse_type("STRUCT(tone ENUM('positive','negative'))"))
    assert enum["properties"]["tone"] == {"type": "string", "enum": ["positive", "negative"]}
    date = json_schema(parse_type("DATE"))
    assert date["type"] == "string" and date["format"] == "date"
    pattern = re.compile(date["pattern"])
    assert pattern.match("2024-12-31") and pattern.match("1999-02-28")
    for bad in ("2024-02-30", "2024-04-31", "2024-13-01", "0999-01-01", "2024-1-1"):
        assert not pattern.match(bad), bad
    assert json_schema(parse_type("JSON")) == {"type": ["object", "array"]}


def test_dates_survive_the_cache_and_wire_as_iso_text() -> None:
    spec = parse_type("STRUCT(d DATE, l DATE[])")
    value = {"d": datetime.date(2020, 1, 2), "l": [datetime.date(2021, 3, 4)]}
    back = Completion.from_json(Completion(value, "", 1, 1).to_json()).value
    assert back == {"d": "2020-01-02", "l": ["2021-03-04"]}
    assert to_arrow(spec, [back, value, None]).to_pylist() == [value, value, None]
