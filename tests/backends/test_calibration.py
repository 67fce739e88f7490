"""Per-template calibration on the HTTP backend: content-free and irrelevant-text rows of the
template set the offset."""

from __future__ import annotations

import json
from typing import Any

import httpx

from duckdb_sem.backends.openai import OpenAIBackend
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import CALIBRATION_TEXTS, CONTENT_FREE_FILLERS, OperatorKind
from duckdb_sem.llm.template import parse_template

# A model biased towards yes for this question: every row, content-free or not, scores
# log-odds 2 plus 1 when the row says "great"; uncalibrated, it says yes to everything.
TEMPLATE = parse_template("Is this review favourable? {text}").positional()


def _backend(seen: list[str]) -> OpenAIBackend:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m", "owned_by": "vllm"}]})
        if request.url.path.endswith("/batch"):  # a vLLM before the batch route
            return httpx.Response(404, json={"detail": "Not Found"})
        body = json.loads(request.content)
        row = body["messages"][-1]["content"]
        seen.append(row)
        margin = 2.0 + (1.0 if "great" in row else -1.0 if "awful" in row else 0.0)
        top = [{"token": "yes", "logprob": margin / 2}, {"token": "no", "logprob": -margin / 2}]
        choice: dict[str, Any] = {
            "message": {"role": "assistant", "content": "yes"},
            "logprobs": {"content": [{"token": "yes", "logprob": 0.0, "top_logprobs": top}]},
        }
        usage = {"prompt_tokens": 9, "completion_tokens": 1}
        return httpx.Response(200, json={"choices": [choice], "usage": usage})

    return OpenAIBackend("http://127.0.0.1:1/v1", transport=httpx.MockTransport(handle))


def _requests(*, template: bool) -> list[Any]:
    texts = ["a great film", "an awful film", "a great cast", "awful pacing"]
    return [
        build_request(OperatorKind.FILTER, TEMPLATE.render([t]),
                      template=TEMPLATE if template else None)
        for t in texts
    ]  # fmt: skip


def test_uncalibrated_requests_follow_the_bias() -> None:
    backend = _backend([])
    assert [c.value for c in backend.complete(_requests(template=False))] == [True] * 4
    backend.close()


def test_template_offset_is_measured_once_and_removes_the_bias() -> None:
    seen: list[str] = []
    backend = _backend(seen)
    out = backend.complete(_requests(template=True))
    assert [c.value for c in out] == [True, False, True, False]
    assert [c.score for c in out] == [1.0, -1.0, 1.0, -1.0]
    content_free = [TEMPLATE.render([f]) for f in (*CONTENT_FREE_FILLERS, *CALIBRATION_TEXTS)]
    assert sorted(set(seen) & set(content_free)) == sorted(content_free)
    again = backend.complete(_requests(template=True))
    assert [c.value for c in again] == [True, False, True, False]
    assert len(seen) == len(content_free) + 8  # the offset is not measured again
    backend.close()
