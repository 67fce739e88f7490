"""Typed outputs over HTTP: the schema goes out as ``response_format``, the JSON comes back typed.

Per type against a mock transport (what is sent, what is parsed) and against the sim server
over a real socket (which reads the same fields a real server does). The real llama.cpp server
case is in ``test_openai.py``.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from sim_serving import sim_serving

from duckdb_sem.backends.openai import OpenAIBackend
from duckdb_sem.backends.registry import create_backend
from duckdb_sem.backends.sim.server import SimServer
from duckdb_sem.errors import BackendError, ConfigError
from duckdb_sem.llm.outputs import json_schema, parse_type, type_from_schema
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.llm.template import parse_template

TYPES: list[tuple[str, str, Callable[[Any], bool]]] = [
    ("INTEGER", "42", lambda v: v == 42),
    ("DOUBLE", "2.5", lambda v: v == 2.5),
    ("BOOLEAN", "true", lambda v: v is True),
    ("VARCHAR[]", '["a", "b"]', lambda v: v == ["a", "b"]),
    ("STRUCT(year INTEGER, tags VARCHAR[])", '{"year": 1999, "tags": ["x"]}',
     lambda v: v == {"year": 1999, "tags": ["x"]}),
    ("DATE", '"2001-12-07"', lambda v: v == datetime.date(2001, 12, 7)),
    ("JSON", '{"a": [1, null]}', lambda v: v == '{"a":[1,null]}'),
    ("ENUM('positive', 'negative')", '"negative"', lambda v: v == "negative"),
    ("STRUCT(tone ENUM('positive', 'negative'), day DATE, facts JSON)",
     '{"tone": "positive", "day": "1999-01-02", "facts": [1]}',
     lambda v: v == {"tone": "positive", "day": datetime.date(1999, 1, 2), "facts": "[1]"}),
]  # fmt: skip


def _mock(
    reply: str, seen: list[dict[str, Any]], owner: str = "vllm", *, spec: str = ""
) -> OpenAIBackend:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m", "owned_by": owner}]})
        if request.url.path != "/v1/chat/completions":
            return httpx.Response(404)
        seen.append(json.loads(request.content))
        if reply == "REFUSE" and "response_format" in seen[-1]:
            return httpx.Response(400, json={"error": "response_format is not supported"})
        message = {"role": "assistant", "content": reply}
        usage = {"prompt_tokens": 5, "completion_tokens": 2}
        return httpx.Response(200, json={"choices": [{"message": message}], "usage": usage})

    return OpenAIBackend(
        "http://127.0.0.1:1/v1", transport=httpx.MockTransport(handle), structured=spec != "off"
    )


@pytest.mark.parametrize(("sql_type", "reply", "check"), TYPES)
def test_schema_is_sent_and_json_parsed(
    sql_type: str, reply: str, check: Callable[[Any], bool]
) -> None:
    seen: list[dict[str, Any]] = []
    backend = _mock(reply, seen)
    request = build_request(OperatorKind.MAP, "x", output_type=sql_type)
    (answer,) = backend.complete([request])
    assert answer.error is None and check(answer.value), answer
    fmt = seen[0]["response_format"]
    assert fmt["type"] == "json_schema"
    labels = request.output.labels  # BOOLEAN is a closed answer: yes/no
    assert fmt["json_schema"]["schema"] == json_schema(parse_type(sql_type), labels)
    backend.close()


def test_llama_cpp_python_server_gets_its_own_spelling() -> None:
    seen: list[dict[str, Any]] = []
    backend = _mock("7", seen, owner="me")
    (answer,) = backend.complete([build_request(OperatorKind.MAP, "x", output_type="INTEGER")])
    assert answer.value == 7
    assert seen[0]["response_format"] == {"type": "json_object", "schema": {"type": "integer"}}
    backend.close()


def test_free_text_sends_no_schema_and_labels_send_an_enum() -> None:
    seen: list[dict[str, Any]] = []
    backend = _mock('"drama"', seen)
    backend.complete([build_request(OperatorKind.MAP, "x", output_type="VARCHAR")])
    assert "response_format" not in seen[0]
    request = build_request(OperatorKind.MAP, "x", labels=("crime", "drama"))
    (answer,) = backend.complete([request])
    assert answer.value == "drama"
    schema = seen[1]["response_format"]["json_schema"]["schema"]
    assert schema == {"type": "string", "enum": ["crime", "drama"]}
    backend.close()


def test_an_answer_outside_the_labels_is_null_with_a_reason() -> None:
    backend = _mock('"western"', [])
    (answer,) = backend.complete([build_request(OperatorKind.MAP, "x", labels=("crime", "drama"))])
    assert answer.value is None and "not one of" in (answer.error or "")
    backend.close()


def test_every_closed_set_is_sent_as_an_enum_schema() -> None:
    seen: list[dict[str, Any]] = []
    backend = _mock('"yes"', seen)
    rating = parse_template("Rate from 1 to 5: {0}")
    requests = [
        build_request(OperatorKind.MAP, "x", output_type="ENUM('pos', 'neg')"),
        build_request(OperatorKind.MAP, "x", output_type="BOOLEAN"),
        build_request(OperatorKind.MAP, rating.render(["x"]), output_type="INTEGER",
                      template=rating),
        build_request(OperatorKind.MAP, "x", labels=("crime", "drama")),
    ]  # fmt: skip
    backend.complete(requests)
    schemas = [body["response_format"]["json_schema"]["schema"] for body in seen[:4]]
    assert schemas[0] == {"type": "string", "enum": ["pos", "neg"]}
    assert schemas[1] == {"type": "boolean", "enum": [True, False]}
    assert schemas[2] == {"type": "integer", "enum": [1, 2, 3, 4, 5]}
    assert schemas[3] == {"type": "string", "enum": ["crime", "drama"]}
    backend.close()


def test_a_server_refusing_the_schema_says_how_to_go_on() -> None:
    backend = _mock("REFUSE", [])
    with pytest.raises(BackendError, match=r"structured=off"):
        backend.complete([build_request(OperatorKind.MAP, "x", output_type="DATE")])
    backend.close()


def test_structured_off_sends_no_schema_and_parses_text() -> None:
    seen: list[dict[str, Any]] = []
    backend = _mock("The tone is Negative.", seen, spec="off")
    request = build_request(OperatorKind.MAP, "x", output_type="ENUM('positive', 'negative')")
    (answer,) = backend.complete([request])
    assert answer.value == "negative" and "response_format" not in seen[0]
    assert backend.answers != _mock("x", []).answers  # another identity: other answers
    backend.close()
    with pytest.raises(ConfigError, match="on or off"):
        create_backend("openai:http://127.0.0.1:1/v1?structured=maybe")


def test_an_answer_cut_off_under_its_schema_is_closed_not_null() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m", "owned_by": "vllm"}]})
        if request.url.path.endswith("/batch"):  # a vLLM before the batch route
            return httpx.Response(404, json={"detail": "Not Found"})
        cut = '{"tone": "negative", "keyword": "dull and ov'
        choice = {"message": {"content": cut}, "finish_reason": "length"}
        return httpx.Response(200, json={"choices": [choice], "usage": {}})

    backend = OpenAIBackend("http://127.0.0.1:1/v1", transport=httpx.MockTransport(handle))
    sql = "STRUCT(tone ENUM('positive', 'negative'), keyword VARCHAR)"
    (answer,) = backend.complete([build_request(OperatorKind.MAP, "x", output_type=sql)])
    assert answer.value == {"tone": "negative", "keyword": "dull and ov"}
    backend.close()


def test_schema_round_trips_to_the_sql_type() -> None:
    for sql in ("VARCHAR", "DOUBLE", "BOOLEAN", "BIGINT[]", 'STRUCT("a" BIGINT, "b" VARCHAR[])',
                "DATE", "JSON", "ENUM('a', 'b')", 'STRUCT("t" ENUM(\'a\', \'b\'), "d" DATE[])'):  # fmt: skip
        assert type_from_schema(json_schema(parse_type(sql))) == sql
    assert type_from_schema({"type": "object"}) is None


@pytest.fixture
def sim_server() -> Iterator[SimServer]:
    with sim_serving("sim:default?seed=1") as server:
        yield server


@pytest.mark.parametrize("sql_type", [t for t, _, _ in TYPES])
def test_every_type_through_the_sim_server(sim_server: SimServer, sql_type: str) -> None:
    remote = create_backend(f"openai:{sim_server.base_url}")
    spec = parse_type(sql_type)
    requests = [build_request(OperatorKind.MAP, f"row {i}", output_type=sql_type) for i in range(8)]
    answers = remote.complete(requests)
    assert all(a.error is None and a.value is not None for a in answers), answers
    for a in answers:
        assert spec.coerce(json.loads(a.text)) == a.value  # the server answered JSON
    remote.close()


def test_closed_answers_through_the_sim_server(sim_server: SimServer) -> None:
    remote = create_backend(f"openai:{sim_server.base_url}")
    rating = parse_template("Rate from 1 to 5: {0}")
    requests = [
        build_request(OperatorKind.MAP, rating.render([f"r{i}"]), output_type="INTEGER",
                      template=rating)
        for i in range(12)
    ]  # fmt: skip
    values = [a.value for a in remote.complete(requests)]
    assert set(values) <= {1, 2, 3, 4, 5} and None not in values
    remote.close()
