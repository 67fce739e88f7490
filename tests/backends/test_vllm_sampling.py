"""What ``vllm:`` constrains each request to, against stand-ins for vLLM's parameter classes
(vLLM itself is optional; tests/backends/test_vllm.py runs the real engine)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from duckdb_sem.backends import vllm_sampling
from duckdb_sem.backends.base import RETRY_POLICY
from duckdb_sem.backends.vllm_sampling import sampling_params, structured_kind
from duckdb_sem.llm.outputs import json_schema, parse_type
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.llm.template import parse_template


@dataclass
class _Params:
    kwargs: dict[str, Any] = field(default_factory=dict)


def _vllm(kind: str) -> Any:
    def params(**kwargs: Any) -> _Params:
        return _Params(kwargs)

    module = SimpleNamespace()
    if kind == "structured_outputs":
        module.StructuredOutputsParams = params
    elif kind == "guided_decoding":
        module.GuidedDecodingParams = params
    return SimpleNamespace(SamplingParams=params, sampling_params=module)


def _sampled(vllm: Any, request: Any, attempt: int = 0) -> dict[str, Any]:
    out = sampling_params(vllm, request, attempt, retry=RETRY_POLICY, top_logprobs=5,
                          answer_ids=[7, 8])  # fmt: skip
    assert isinstance(out, _Params)
    return out.kwargs


TONE = "ENUM('positive', 'negative')"
RATING = parse_template("Rate from 1 to 5: {0}")


@pytest.mark.parametrize("kind", ["structured_outputs", "guided_decoding"])
def test_closed_answers_are_a_choice_and_typed_answers_a_schema(kind: str) -> None:
    vllm = _vllm(kind)
    assert structured_kind(vllm) == kind
    closed = [
        (build_request(OperatorKind.MAP, "x", output_type=TONE), ["positive", "negative"]),
        (build_request(OperatorKind.MAP, "x", output_type="BOOLEAN"), ["yes", "no"]),
        (build_request(OperatorKind.MAP, "x", labels=("crime", "drama")), ["crime", "drama"]),
        (
            build_request(OperatorKind.MAP, RATING.render(["r"]), output_type="INTEGER",
                          template=RATING),
            ["1", "2", "3", "4", "5"],
        ),
    ]  # fmt: skip
    for request, labels in closed:
        assert _sampled(vllm, request)[kind].kwargs == {"choice": labels}
    for sql in (
        "INTEGER",
        "DOUBLE",
        "DATE",
        "JSON",
        "VARCHAR[]",
        f"STRUCT(tone {TONE}, k VARCHAR)",
    ):
        request = build_request(OperatorKind.MAP, "x", output_type=sql)
        sent = _sampled(vllm, request, attempt=1)
        assert sent[kind].kwargs == {"json": json_schema(parse_type(sql))}
        assert sent["seed"] == 1 and sent["temperature"] == RETRY_POLICY.retry_temperature


def test_decisions_and_free_text_are_not_schema_constrained() -> None:
    vllm = _vllm("structured_outputs")
    decide = _sampled(vllm, build_request(OperatorKind.FILTER, "x"))
    assert decide == {
        "max_tokens": 1,
        "temperature": 0.0,
        "logprobs": 5,
        "allowed_token_ids": [7, 8],
    }
    text = _sampled(vllm, build_request(OperatorKind.MAP, "x", output_type="VARCHAR"))
    assert "structured_outputs" not in text and text["max_tokens"] == 64


def test_a_vllm_without_structured_outputs_generates_free_text_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    vllm = _vllm("none")
    assert structured_kind(vllm) == "none"
    vllm_sampling._warn_unconstrained.cache_clear()  # said once per process: say it here
    with caplog.at_level(logging.WARNING, logger="duckdb_sem.backends.vllm_sampling"):
        sent = _sampled(vllm, build_request(OperatorKind.MAP, "x", output_type=TONE))
        _sampled(vllm, build_request(OperatorKind.MAP, "x", output_type="DATE"))
    assert set(sent) == {"max_tokens", "temperature", "seed"}
    assert caplog.text.count("no structured outputs") == 1
