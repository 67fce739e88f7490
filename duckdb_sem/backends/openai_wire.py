"""The ``openai:`` backend's chat requests and answers on the wire.

A request is one chat completion: the shared prefix as the system message (first, so a server's
prefix cache reuses it), the row as the user message (:func:`chat_body`). A decision asks for
one token with ``top_logprobs`` and is read as the log-odds of the yes-tokens over the
no-tokens (:func:`decide_from_logprobs`), so "Yes.", " yes" and "TRUE" all count. A typed
answer sends the type's JSON schema as ``response_format`` (structured outputs, which vLLM,
llama.cpp's server and the sim server honour; :func:`output_schema`) and is parsed from that
JSON into the SQL type, or from text when a server ignored the schema (:func:`parse_answer`). Transport failures, HTTP
408/429/5xx and unreadable answers become :class:`~duckdb_sem.backends.retry.Transient` for
the retry loop (:func:`post_once`).

Example: top alternatives ``[("Yes", -0.1), (" yes", -2.5), ("No", -2.4)]`` give
``log(e**-0.1 + e**-2.5) - (-2.4)``, about 2.39: yes.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Sequence
from typing import Any

import httpx

from duckdb_sem.backends.base import RetryPolicy
from duckdb_sem.backends.openai_server import check_status
from duckdb_sem.backends.retry import RETRYABLE_STATUS, Transient
from duckdb_sem.errors import BackendError, BackendTimeoutError, BackendUnavailableError
from duckdb_sem.llm.outputs import OutputParseError, json_schema, parse_type
from duckdb_sem.llm.request import Completion, LLMRequest, Task
from duckdb_sem.llm.scalars import close_json

__all__ = [
    "RouteRefused",
    "chat_body",
    "decide_from_logprobs",
    "output_schema",
    "parse_answer",
    "post_once",
    "read_completion",
    "retry_after",
]

_YES = {"yes", "y", "true"}
_NO = {"no", "n", "false"}


def decide_from_logprobs(pairs: Sequence[tuple[str, float]]) -> float | None:
    """Log-odds of yes over no from (token, logprob) alternatives; None when neither appears.

    A class missing from the top alternatives gets at most the smallest listed probability.
    """
    yes = [lp for tok, lp in pairs if _norm(tok) in _YES]
    no = [lp for tok, lp in pairs if _norm(tok) in _NO]
    if not yes and not no:
        return None
    floor = min(lp for _, lp in pairs)
    return _logsumexp(yes or [floor]) - _logsumexp(no or [floor])


@functools.lru_cache(maxsize=4096)
def _norm(token: str) -> str:  # the same few tokens come back row after row
    return re.sub(r"[^a-z]", "", token.lower())


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def chat_body(
    request: LLMRequest,
    *,
    model: str,
    attempt: int,
    priority: int,
    retry: RetryPolicy,
    top_logprobs: int,
    schema_format: str = "json_schema",
    structured: bool = True,
) -> dict[str, Any]:
    """The ``/chat/completions`` body of one try; a retry gets a new seed and temperature.

    A typed or closed answer's schema goes in ``response_format`` as OpenAI and vLLM spell it
    (``json_schema``), or as llama-cpp-python's server does (``json_object`` with ``schema``);
    with ``structured`` off (a server without structured outputs) it is not sent.
    """
    params = request.params
    messages = [{"role": "user", "content": request.row}]
    if request.prefix:
        messages.insert(0, {"role": "system", "content": request.prefix})
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "temperature": params.temperature if attempt == 0 else retry.retry_temperature,
        "seed": params.seed + attempt,
        "max_tokens": params.max_tokens,
    }
    if priority:
        body["priority"] = priority
    if request.output.task is Task.DECIDE:
        body.update(max_tokens=1, logprobs=True, top_logprobs=top_logprobs)
    elif structured:
        schema = output_schema(request)
        if schema is not None and schema_format == "json_object":
            body["response_format"] = {"type": "json_object", "schema": schema}
        elif schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": schema, "strict": True},
            }
    return body


def output_schema(request: LLMRequest) -> dict[str, Any] | None:
    """The JSON schema a typed answer must match (structured outputs); None for free text."""
    spec = parse_type(request.output.sql_type)
    if spec.is_text and not request.output.labels:
        return None
    return json_schema(spec, request.output.labels)


def parse_answer(request: LLMRequest, text: str) -> Any:
    """An answer's value: JSON under the schema that was sent, else the type's text parser."""
    spec = parse_type(request.output.sql_type)
    value: Any = None
    if output_schema(request) is not None:
        try:
            value = spec.coerce(json.loads(text))
        except (json.JSONDecodeError, OutputParseError):
            value = None  # no schema sent, or a server ignored it: parse the text as generated
    if value is None:
        value = spec.parse(text)
    labels = request.output.labels
    if labels and value not in {spec.parse(label) for label in labels}:
        raise OutputParseError(f"{value!r} is not one of {', '.join(labels)}")
    return value


def read_completion(request: LLMRequest, data: Any, *, threshold: float) -> Completion:
    """The completion in a chat answer: a decision above ``threshold``, or a parsed value."""
    choice, usage = data["choices"][0], data.get("usage") or {}
    text = str((choice.get("message") or {}).get("content") or "")
    tokens = (int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)))
    cached = _cached_tokens(usage)
    if request.output.task is Task.DECIDE:
        try:
            content = (choice.get("logprobs") or {}).get("content") or [{"top_logprobs": []}]
            pairs = [(a["token"], float(a["logprob"])) for a in content[0]["top_logprobs"]]
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            pairs = []  # unreadable log-probabilities: no decision, retried by the caller
        score = decide_from_logprobs(pairs) if pairs else None
        if score is None:
            error = f"no yes/no token among the top log-probabilities (answer {text!r})"
            return Completion(None, text, *tokens, error=error, cached_tokens=cached)
        return Completion(score > threshold, text, *tokens, score=score, cached_tokens=cached)
    cut = choice.get("finish_reason") == "length" and output_schema(request) is not None
    if cut and parse_type(request.output.sql_type).is_json:  # cut off under its schema
        text = close_json(text)
    try:
        return Completion(parse_answer(request, text), text, *tokens, cached_tokens=cached)
    except OutputParseError as err:
        return Completion(None, text, *tokens, error=str(err), cached_tokens=cached)


def _cached_tokens(usage: dict[str, Any]) -> int:
    """Prompt tokens the server took from its prefix cache: OpenAI's and vLLM's (with
    ``--enable-prompt-tokens-details``) ``usage.prompt_tokens_details.cached_tokens``; 0 when
    the server does not say."""
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return cached if isinstance(cached, int) and cached > 0 else 0


class RouteRefused(Exception):
    """The server answered one of the statuses the caller asked to handle itself (``refused``
    of :func:`post_once`): say, 404 for a route it does not serve."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def post_once(
    client: httpx.Client,
    base_url: str,
    path: str,
    body: dict[str, Any],
    *,
    spec: str,
    refused: tuple[int, ...] = (),
) -> Any:
    """POST once and return the JSON answer; failures worth another try raise ``Transient``,
    a status in ``refused`` raises :class:`RouteRefused` (the caller's to handle)."""
    try:
        resp = client.post(base_url + path, json=body)
    except httpx.TimeoutException as err:
        raise Transient(
            BackendTimeoutError(f"{spec}: no answer in time ({type(err).__name__})")
        ) from None
    except httpx.TransportError as err:
        raise Transient(
            BackendUnavailableError(f"{spec}: lost {base_url} ({type(err).__name__}: {err})")
        ) from None
    if resp.status_code in RETRYABLE_STATUS:
        raise Transient(
            BackendError(f"{spec}: HTTP {resp.status_code} from {resp.url}: {resp.text[:200]}"),
            retry_after=retry_after(resp),
        )
    if resp.status_code in refused:
        raise RouteRefused(
            resp.status_code, f"{spec}: HTTP {resp.status_code} from {resp.url}: {resp.text[:300]}"
        )
    check_status(resp, spec)
    try:
        data = resp.json()
        if not isinstance(data["choices"][0], dict):
            raise TypeError("choices[0] is not an object")
    except (ValueError, KeyError, IndexError, TypeError) as err:
        raise Transient(
            BackendError(
                f"{spec}: unreadable answer from {resp.url} "
                f"({type(err).__name__}: {err}): {resp.text[:120]!r}"
            )
        ) from None
    return data


def retry_after(resp: httpx.Response) -> float | None:
    """Seconds from a ``Retry-After`` header (only the delay-seconds form), capped at 30."""
    try:
        return min(30.0, max(0.0, float(resp.headers.get("retry-after", ""))))
    except ValueError:
        return None
