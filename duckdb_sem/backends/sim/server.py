"""The SIMULATED backend as an OpenAI-compatible HTTP server (``duckdb-sem sim-server``).

Other tools (LOTUS, plain OpenAI clients, load generators) can be measured against the same
simulated GPU as duckdb-sem. Endpoints: ``GET /health``, ``GET /v1/models``,
``POST /v1/chat/completions``, ``POST /v1/chat/completions/batch`` (vLLM's: a list of
conversations in ``messages``, one choice each, one ``usage`` for all, the whole batch refused
for one bad conversation), ``POST /v1/completions``, ``POST /tokenize``, ``GET /metrics``
(vLLM's request gauges, so the ``openai:`` backend reads load from it the same way), and
``POST /v1/embeddings`` (SIMULATED vectors of hashed words, :mod:`.embeddings`; deterministic,
so the ``openai-embed:`` client can be tested and benchmarked against it).

Every response says SIMULATED: the model id starts with ``SIMULATED-``, ``system_fingerprint``
and the ``X-Simulated`` header carry the profile. Chat requests map the system message to the
shared prefix and the last user message to the row; a request with ``max_tokens=1`` and
``logprobs`` (or vLLM's ``guided_choice``) is a decision, answered with yes/no top
log-probabilities; a ``response_format`` JSON schema (structured outputs) sets the answer's
type, and the answer is JSON of that type (one of the schema's ``enum`` when it has one). With
a ``rate_limit`` (``--rpm``/``--tpm``) a completion or an embeddings request over it is refused
as a hosted server does: HTTP 429 with ``Retry-After`` (whole seconds), counted in
``rate_limited`` (one bucket for both, an embeddings request costing its texts' tokens). A stdlib
``ThreadingHTTPServer``: one thread per connection, all joining the one simulated engine,
which batches them.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from duckdb_sem.backends.rate_limit import RateLimit, RateLimiter, chat_cost, embed_cost
from duckdb_sem.backends.sim.backend import SimBackend
from duckdb_sem.backends.sim.embeddings import SIM_EMBED_MODEL, hashed_embedding
from duckdb_sem.backends.sim.oracles import estimate_tokens
from duckdb_sem.errors import BackendError, BackendTimeoutError, SemError
from duckdb_sem.llm.outputs import type_from_schema
from duckdb_sem.llm.request import (
    Completion,
    DecodingParams,
    LLMRequest,
    OperatorKind,
    OutputSpec,
    Task,
    json_default,
)

__all__ = ["SimServer", "decision_logprobs"]

logger = logging.getLogger(__name__)


def decision_logprobs(score: float) -> tuple[float, float]:
    """(logprob of yes, logprob of no) for a yes/no log-odds ``score`` (a two-way softmax)."""
    return -_softplus(-score), -_softplus(score)


def _softplus(x: float) -> float:
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


class SimServer:
    """Serve ``backend`` on ``host:port`` (port 0 picks a free one); ``start`` runs a thread."""

    def __init__(
        self,
        backend: SimBackend,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        rate_limit: RateLimit | None = None,
    ) -> None:
        self.backend = backend
        self.limiter = (
            None if rate_limit is None or rate_limit.unlimited else RateLimiter(rate_limit)
        )
        #: requests refused with 429, completions answered and embeddings requests answered
        #: (what a rate-limit test reads)
        self.rate_limited = 0
        self.answered = 0
        self.batch_requests = 0  # HTTP requests to the batch route (each of many conversations)
        self.embedded = 0
        self._count_lock = threading.Lock()
        self.model_id = f"SIMULATED-{backend.profile.model}"
        self.started = int(time.time())
        handler = type("_Handler", (_Handler,), {"sim": self})
        self.httpd = _Server((host, port), handler)
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.httpd.server_address[:2]
        return str(host), int(port)

    @property
    def base_url(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}/v1"

    def start(self) -> SimServer:
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        logger.info("SIMULATED sim server on %s: %s", self.base_url, self.backend.describe())
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def admit(self, body: dict[str, Any], *, embeddings: bool = False) -> float:
        """0 when the rate limit lets this completion (or embeddings request) through now,
        else the seconds until it would (the request is then refused with 429)."""
        cost = embed_cost(body) if embeddings else chat_cost(body)
        wait = 0.0 if self.limiter is None else self.limiter.reserve(cost)
        if wait > 0:
            with self._count_lock:
                self.rate_limited += 1
        return wait

    def count_embedded(self) -> None:
        with self._count_lock:
            self.embedded += 1

    def answer(self, body: dict[str, Any], *, chat: bool) -> dict[str, Any]:
        return self._answers([body], chat=chat)[0]

    def answer_batch(self, body: dict[str, Any]) -> dict[str, Any]:
        """vLLM's ``/v1/chat/completions/batch``: each conversation of ``messages`` answered as
        its own chat request (one engine submission, so they batch), one choice each."""
        conversations = body.get("messages")
        if (
            not isinstance(conversations, list)
            or not conversations
            or not all(isinstance(c, list) for c in conversations)
        ):
            raise ValueError("a batch's 'messages' must be a non-empty list of conversations")
        if body.get("stream") or (body.get("n") or 1) != 1:
            raise ValueError("a batch takes neither stream nor n > 1")
        with self._count_lock:
            self.batch_requests += 1
        answers = self._answers([{**body, "messages": c} for c in conversations], chat=True)
        usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        cached = 0
        choices = []
        for index, answer in enumerate(answers):
            choices.append({**answer["choices"][0], "index": index})
            for key in usage:
                usage[key] += answer["usage"][key]
            cached += answer["usage"]["prompt_tokens_details"]["cached_tokens"]
        return {
            **answers[0],
            "id": f"sim-batch-{answers[0]['id'].removeprefix('sim-')}",
            "choices": choices,
            "usage": {**usage, "prompt_tokens_details": {"cached_tokens": cached}},
        }

    def _answers(self, bodies: list[dict[str, Any]], *, chat: bool) -> list[dict[str, Any]]:
        parsed = [_to_request(body, chat=chat) for body in bodies]
        completions = self.backend.complete([request for request, _ in parsed])
        with self._count_lock:
            self.answered += len(bodies)
        out = []
        for body, (request, logprobs), completion in zip(bodies, parsed, completions, strict=True):
            if completion.error is not None and completion.value is None and not completion.text:
                raise SemError(completion.error)
            schema = _schema(body)
            if schema is not None and completion.error is None:  # structured output: JSON text
                value = completion.value
                if isinstance(schema.get("enum"), list) and schema["enum"]:
                    enum = schema["enum"]
                    key = request.signature(self.backend.backend_id)[:8]
                    value = enum[int(key, 16) % len(enum)]
                text = json.dumps(value, default=json_default)
                completion = dataclasses.replace(completion, value=value, text=text)
            out.append(self._response(body, completion, request, chat=chat, logprobs=logprobs))
        return out

    def _response(
        self,
        body: dict[str, Any],
        completion: Completion,
        request: LLMRequest,
        *,
        chat: bool,
        logprobs: int,
    ) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
        if request.output.task is Task.DECIDE:
            finish = "length"
            yes_lp, no_lp = decision_logprobs(completion.score or 0.0)
            top = [{"token": "yes", "logprob": yes_lp}, {"token": "no", "logprob": no_lp}]
            top.sort(key=lambda alt: -float(str(alt["logprob"])))
            chosen = top[0]
            choice["finish_reason"] = finish
            if chat:
                entry = {**chosen, "top_logprobs": top[: max(logprobs, 1)]}
                choice["logprobs"] = {"content": [entry]}
            else:
                choice["logprobs"] = {
                    "tokens": [chosen["token"]],
                    "token_logprobs": [chosen["logprob"]],
                    "top_logprobs": [{str(a["token"]): a["logprob"] for a in top}],
                }
        if chat:
            choice["message"] = {"role": "assistant", "content": completion.text}
        else:
            choice["text"] = completion.text
        return {
            "id": f"sim-{request.signature(self.backend.backend_id)[:16]}",
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model_id,
            "system_fingerprint": f"SIMULATED {self.backend.profile.name}",
            "choices": [choice],
            "usage": {
                "prompt_tokens": completion.prompt_tokens,
                "completion_tokens": completion.completion_tokens,
                "total_tokens": completion.prompt_tokens + completion.completion_tokens,
                # as vLLM with --enable-prompt-tokens-details: the prefix cache's share
                "prompt_tokens_details": {"cached_tokens": completion.cached_tokens},
            },
        }


def _to_request(body: dict[str, Any], *, chat: bool) -> tuple[LLMRequest, int]:
    if chat:
        messages = body.get("messages") or []
        prefix = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
        users = [str(m.get("content", "")) for m in messages if m.get("role") != "system"]
        row = users[-1] if users else ""
        wants = bool(body.get("logprobs"))
        top = int(body.get("top_logprobs") or 2)
    else:
        prompt = body.get("prompt", "")
        prefix, row = "", prompt if isinstance(prompt, str) else str(prompt[0])
        wants = body.get("logprobs") is not None
        top = int(body.get("logprobs") or 2)
    max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
    decide = bool(body.get("guided_choice")) or (wants and max_tokens == 1)
    sql_type = str(body.get("duckdb_sem_sql_type") or type_from_schema(_schema(body)) or "VARCHAR")
    output = OutputSpec.decision() if decide else OutputSpec(Task.GENERATE, sql_type)
    params = DecodingParams(
        max_tokens=max_tokens,
        temperature=float(body.get("temperature") or 0.0),
        seed=int(body.get("seed") or 0),
    )
    operator = OperatorKind.FILTER if decide else OperatorKind.MAP
    return LLMRequest(operator, prefix, row, output, params), top


def _schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema of a structured-output request, in OpenAI's/vLLM's spelling
    (``json_schema``) or llama-cpp-python's (``json_object`` with ``schema``)."""
    fmt = body.get("response_format")
    if not isinstance(fmt, dict):
        return None
    schema = fmt.get("schema") if fmt.get("type") == "json_object" else None
    if fmt.get("type") == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema")
    return schema if isinstance(schema, dict) else None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the stdlib's 5 resets bursts of concurrent clients


class _Handler(BaseHTTPRequestHandler):
    sim: SimServer
    protocol_version = "HTTP/1.1"
    # Reply without Nagle's delay (as uvicorn does for vLLM): the stdlib handler writes headers
    # and body separately, so a client's sequential small requests would wait ~40 ms each.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("sim server: " + format, *args)

    def do_GET(self) -> None:
        if self.path == "/health":
            self._send(200, {"status": "ok", "simulated": True})
        elif self.path in ("/v1/models", "/models"):
            self._send(
                200,
                {
                    "object": "list",
                    "data": [
                        {
                            "id": self.sim.model_id,
                            "object": "model",
                            "created": self.sim.started,
                            "owned_by": "duckdb-sem-sim",
                            "simulated": True,
                            "description": self.sim.backend.describe(),
                        }
                    ],
                },
            )
        elif self.path == "/metrics":
            load = self.sim.backend.load()
            stats = self.sim.backend.stats()
            text = (
                "# SIMULATED duckdb-sem sim server\n"
                f'vllm:num_requests_running{{model_name="{self.sim.model_id}"}} {load.running}\n'
                f'vllm:num_requests_waiting{{model_name="{self.sim.model_id}"}} {load.queued}\n'
                f"duckdb_sem_sim_virtual_seconds {stats.virtual_seconds}\n"
                f'vllm:prefix_cache_queries_total{{model_name="{self.sim.model_id}"}} '
                f"{stats.queried_tokens}\n"
                f'vllm:prefix_cache_hits_total{{model_name="{self.sim.model_id}"}} '
                f"{stats.cached_tokens}\n"
                f"duckdb_sem_sim_evicted_blocks_total {stats.evicted_blocks}\n"
            )
            self._send_raw(200, text.encode(), "text/plain; version=0.0.4")
        else:
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

    def do_POST(self) -> None:
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if not isinstance(body, dict):
                raise ValueError("the request body must be a JSON object")
        except ValueError as err:
            self._send(400, {"error": {"message": f"bad JSON: {err}", "type": "invalid_request"}})
            return
        if self.path in ("/tokenize", "/v1/tokenize"):
            self._send(200, {"count": estimate_tokens(str(body.get("prompt", "")))})
            return
        if self.path in ("/v1/embeddings", "/embeddings"):
            self._embeddings(body)
            return
        batch = self.path in ("/v1/chat/completions/batch", "/chat/completions/batch")
        if not batch and self.path not in ("/v1/chat/completions", "/v1/completions"):
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        model = body.get("model")
        if model not in (None, self.sim.model_id):
            message = f"The model `{model}` does not exist; this SIMULATED server serves {self.sim.model_id}"
            self._send(404, {"error": {"message": message, "type": "NotFoundError"}})
            return
        if self._refused(self.sim.admit(body)):
            return
        try:
            if batch:
                payload = self.sim.answer_batch(body)
            else:
                payload = self.sim.answer(body, chat=self.path.endswith("chat/completions"))
        except BackendError as err:  # injected faults (``fault=``): a server-side failure
            status = 504 if isinstance(err, BackendTimeoutError) else 503
            self._send(status, {"error": {"message": f"{err}", "type": "server_error"}})
            return
        except (SemError, ValueError, TypeError) as err:
            self._send(
                400, {"error": {"message": f"SIMULATED server: {err}", "type": "invalid_request"}}
            )
            return
        self._send(200, payload)

    def _refused(self, wait: float) -> bool:
        """Answer 429 with ``Retry-After`` when the rate limit asks to ``wait``."""
        if wait <= 0:
            return False
        message = f"SIMULATED rate limit ({self.sim.limiter}) reached; retry in {wait:.2f} s"
        retry = {"Retry-After": str(max(1, math.ceil(wait)))}
        self._send(429, {"error": {"message": message, "type": "rate_limit"}}, retry)
        return True

    def _embeddings(self, body: dict[str, Any]) -> None:
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            message = "SIMULATED server: 'input' must be a string or a list of strings"
            self._send(400, {"error": {"message": message, "type": "invalid_request"}})
            return
        if self._refused(self.sim.admit(body, embeddings=True)):
            return
        self.sim.count_embedded()
        data = [
            {"object": "embedding", "index": i, "embedding": hashed_embedding(t)}
            for i, t in enumerate(texts)
        ]
        tokens = sum(estimate_tokens(t) for t in texts)
        model = str(body.get("model") or SIM_EMBED_MODEL)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        self._send(200, {"object": "list", "data": data, "model": model, "usage": usage})

    def _send(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        self._send_raw(status, json.dumps(payload).encode(), "application/json", headers)

    def _send_raw(
        self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Simulated", f"duckdb-sem {self.sim.backend.profile.name}")
        self.end_headers()
        self.wfile.write(data)
