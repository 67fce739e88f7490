"""``openai:``: any OpenAI-compatible server (vLLM, llama.cpp's server, the sim server).

Spec: ``openai:http://127.0.0.1:8000/v1?model=NAME&concurrency=32&timeout=60&threshold=0``
(plus ``retries=4&retry_budget=60&retry_backoff=0.25``, and ``rpm=``/``tpm=`` for a hosted
server's requests- and tokens-per-minute limits, :mod:`.rate_limit`).
The API key comes from ``DUCKDB_SEM_OPENAI_API_KEY``, else ``OPENAI_API_KEY`` (or the variable
named by ``api_key_env=``); it never goes in the spec, which is logged.

Decisions ask for one token with ``logprobs``/``top_logprobs`` and compare the summed
probability of yes-tokens against no-tokens (score = log-odds, yes when above ``threshold``),
so a model that answers "Yes." or " yes" is read correctly and free text is never searched.
A request that carries its template is calibrated per template: the mean score of content-free
rows of that template (fields blanked or "N/A", measured once) is subtracted first
(:mod:`duckdb_sem.llm.calibration`). Typed generation and closed answers (an enum of the labels) send the JSON schema as
``response_format`` (``structured=off`` for a server without structured outputs: then they are
generated free and parsed) and are parsed into the requested type; malformed output is retried per
:data:`~duckdb_sem.backends.base.RETRY_POLICY` (new seed, higher temperature), then NULL.
Transport failures (timeouts, resets, HTTP 408/429/5xx, truncated or unreadable responses) are
retried with backoff per :data:`~duckdb_sem.backends.retry.TRANSPORT_RETRY` (spec options
``retries=`` and ``retry_budget=`` seconds), then raised naming this backend.

The server kind is read from ``/v1/models`` (``owned_by``): with vLLM, load comes from its
Prometheus ``/metrics``, token counts from ``/tokenize``, and non-zero request priorities are
sent (the server needs ``--scheduling-policy priority``); vLLM's automatic prefix caching
reuses the shared prefix because it is always sent first, as the system message.

On vLLM and the sim server the rows of one ``complete`` call go in batch requests (vLLM's
``/v1/chat/completions/batch``, :mod:`.openai_batch`; ``batch=off`` and ``batch_rows=`` in the
spec): one HTTP request for up to ``batch_rows`` rows instead of one a row, the same answers.
A server without the route (HTTP 404) gets one request a row from then on; a batch refused as a
whole (HTTP 400/413/422) is sent again one request a row.

:mod:`.openai_server` discovers the server and reads its ``/metrics`` and tokenizer;
:mod:`.openai_wire` builds each chat request and reads its answer.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, ClassVar

import httpx

from duckdb_sem.backends.base import RETRY_POLICY, Answers, Backend, Capacity, Load, RetryPolicy
from duckdb_sem.backends.connections import ThreadClients
from duckdb_sem.backends.openai_batch import (
    BATCH_PATH,
    NO_ROUTE,
    REFUSED,
    batch_body,
    batch_key,
    chunks,
    split_answer,
)
from duckdb_sem.backends.openai_server import (
    API_KEY_ENV,
    discover,
    key_from_env,
    scrape_load,
    server_token_count,
)
from duckdb_sem.backends.openai_wire import (
    RouteRefused,
    chat_body,
    decide_from_logprobs,
    post_once,
    read_completion,
)
from duckdb_sem.backends.output_retry import answer_with_retries
from duckdb_sem.backends.rate_limit import (
    RATE_OPTIONS,
    RateLimit,
    RateLimiter,
    chat_cost,
    limit_from_spec,
)
from duckdb_sem.backends.registry import BackendSpec, SpecOption
from duckdb_sem.backends.retry import (
    RETRY_OPTIONS,
    TRANSPORT_RETRY,
    TransportRetry,
    call_with_retry,
    policy_from_spec,
)
from duckdb_sem.backends.tokens import estimate_tokens
from duckdb_sem.errors import BackendError, ConfigError
from duckdb_sem.llm.calibration import TemplateOffsets, calibrated
from duckdb_sem.llm.request import Completion, LLMRequest, Task

__all__ = [
    "API_KEY_ENV",
    "OPTIONS",
    "OpenAIAnswers",
    "OpenAIBackend",
    "decide_from_logprobs",
    "from_spec",
]

logger = logging.getLogger(__name__)
_REFUSED = re.compile(r"HTTP (400|422)\b")  # a request the server will not take as it is

#: version of the chat layout :func:`.openai_wire.chat_body` sends (system prefix, user row,
#: typed answers' JSON schema) and of how decisions are read (per-template content-free
#: calibration); bump it when either changes, so cached answers of the old one are not served
WIRE_FORMAT = 3  # 3: one-row decisions also calibrated on irrelevant texts

OPTIONS = (
    SpecOption("model", "served model name (default: the server's only model)", True),
    SpecOption("threshold", "log-odds above which a decision is yes (default 0)", True),
    SpecOption("top_logprobs", "alternatives read for a decision (default 20)", True),
    SpecOption(
        "structured",
        "on (default): typed and closed answers decoded under their JSON schema "
        "(`response_format`); off: for a server without structured outputs, generated free "
        "and parsed",
        True,
    ),
    SpecOption("concurrency", "requests in flight (default 32 on vLLM/sim, else 2)"),
    SpecOption(
        "batch",
        "on (default): on vLLM and the sim server, a batch's rows go in one HTTP request "
        "(/v1/chat/completions/batch), falling back to one request a row where the server "
        "lacks it; off: always one request a row",
    ),
    SpecOption("batch_rows", "most conversations in one batch request (default 64)"),
    SpecOption("timeout", "seconds to wait for one HTTP answer (default 60)"),
    SpecOption("api_key_env", "environment variable holding the API key"),
    *RETRY_OPTIONS,
    *RATE_OPTIONS,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenAIAnswers(Answers):
    server: str  # base URL: another server may serve another build of the same name
    #: servers named as replicas of one scheduler (``duckdb-sem serve --backend openai:A
    #: --backend openai:B``) are the operator's word that they serve the same build
    LOCATION: ClassVar[tuple[str, ...]] = ("server",)
    threshold: float = 0.0
    top_logprobs: int = 20
    wire_format: int = WIRE_FORMAT
    structured: bool = True


class OpenAIBackend(Backend):
    """A client of one model on one OpenAI-compatible server; see the module docstring."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        concurrency: int | None = None,
        timeout: float = 60.0,
        threshold: float = 0.0,
        top_logprobs: int = 20,
        structured: bool = True,
        batch: bool = True,
        batch_rows: int = 64,
        retry: RetryPolicy = RETRY_POLICY,
        transport_retry: TransportRetry = TRANSPORT_RETRY,
        rate_limit: RateLimit | None = None,
        transport: httpx.BaseTransport | None = None,
        spec: str | None = None,
    ) -> None:
        url = base_url.rstrip("/")
        self.base_url = url if url.endswith("/v1") else url + "/v1"
        self.spec = spec or f"openai:{self.base_url}"
        self.threshold = threshold
        self.top_logprobs = top_logprobs
        self.structured = structured
        self.retry = retry
        self.transport_retry = transport_retry
        #: every HTTP try waits on it before it is sent (None: no client-side limit)
        self.rate_limiter = (
            None if rate_limit is None or rate_limit.unlimited else RateLimiter(rate_limit)
        )
        key = api_key if api_key is not None else key_from_env()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        # each request thread its own connection (see connections.py: httpcore's shared pool
        # can close a connection under a request, which then hangs to its read timeout)
        self._clients = ThreadClients(headers=headers, timeout=timeout, transport=transport)
        self._http = self._clients.shared  # discovery, /metrics, /tokenize
        try:
            self.model, self.server_kind = discover(
                self._http, self.base_url, model, spec=self.spec
            )
        except BaseException:
            self._clients.close()  # do not leak the connections of a backend never returned
            raise
        self.answers = OpenAIAnswers(
            kind="openai",
            model=self.model,
            server=self.base_url,
            threshold=threshold,
            top_logprobs=top_logprobs,
            structured=structured,
        )
        default = 32 if self.server_kind in ("vllm", "sim") else 2
        self.concurrency = max(1, concurrency or default)
        self._pool = ThreadPoolExecutor(
            self.concurrency,
            thread_name_prefix="duckdb-sem-openai",
            initializer=self._clients.open_for_thread,
        )
        self._lock = threading.Lock()
        self._queued = self._running = 0
        self._aborted: set[int] = set()
        self._serving: dict[int, httpx.Client] = {}  # id(request) -> the client sending it
        self._token_cache: dict[str, int] = {}
        self._metrics: tuple[float, Load] = (0.0, Load())
        self.warnings = 0
        self._offsets = TemplateOffsets()
        if batch_rows < 1:
            raise ConfigError(f"{self.spec}: batch_rows={batch_rows} must be at least 1")
        self.batch_rows = batch_rows
        #: rows go to the server in batch requests: only servers that have the route (vLLM,
        #: the sim server), and not under a client-side rate limit (hosted APIs have no such
        #: route; a limit counts requests). Cleared when the server answers 404 for it.
        self.batching = batch and self.server_kind in ("vllm", "sim") and self.rate_limiter is None
        logger.info("%s: model %s on a %s server", self.spec, self.model, self.server_kind)

    @property
    def simulated(self) -> bool:  # type: ignore[override]
        return self.server_kind == "sim"

    def capacity(self) -> Capacity:
        return Capacity(max_batch=self.concurrency, max_concurrent_batches=2)

    def load(self) -> Load:
        """The server's own queue gauges when it exports them (vLLM, sim), else client counts."""
        if self.server_kind in ("vllm", "sim"):
            if time.monotonic() - self._metrics[0] > 0.5:  # at most two scrapes a second
                try:
                    self._metrics = (time.monotonic(), scrape_load(self._http, self._root()))
                except (httpx.HTTPError, ValueError):
                    logger.debug("%s: /metrics unreadable; using client-side counts", self.spec)
                    return self._client_load()
            return self._metrics[1]
        return self._client_load()

    def _client_load(self) -> Load:
        with self._lock:
            return Load(queued=self._queued, running=self._running)

    def count_tokens(self, text: str) -> int:
        cached = self._token_cache.get(text)
        if cached is not None:
            return cached
        count = estimate_tokens(text)
        try:
            served = server_token_count(
                self._http, self._root(), kind=self.server_kind, model=self.model, text=text
            )
        except (httpx.HTTPError, KeyError, ValueError):
            logger.debug("%s: server tokenizer unavailable; estimating", self.spec)
        else:
            count = count if served is None else served
        if len(self._token_cache) < 100_000:
            self._token_cache[text] = count
        return count

    def abort(self, requests: Sequence[LLMRequest]) -> None:
        """Requests not yet sent are dropped and those in flight cut off (their connection is
        shut down); both are answered with an ``aborted`` error."""
        with self._lock:
            ids = {id(r) for r in requests}
            self._aborted |= ids
            clients = [c for i, c in self._serving.items() if i in ids]
        for client in clients:
            self._clients.interrupt(client)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._clients.close()

    def complete(self, requests: Sequence[LLMRequest], *, priority: int = 0) -> list[Completion]:
        def attempt(indices: Sequence[int], tries: int) -> list[Completion]:
            return self._try([requests[i] for i in indices], tries, priority)

        try:
            results, failed = answer_with_retries(
                len(requests), attempt, what=self.spec, policy=self.retry
            )
        finally:
            with self._lock:
                self._aborted.difference_update(id(r) for r in requests)
        if failed:
            with self._lock:
                self.warnings += failed
        return results

    def _try(self, requests: list[LLMRequest], attempt: int, priority: int) -> list[Completion]:
        """One try of ``requests``, in parts sent concurrently on the request threads: batches
        of the requests whose bodies differ only in their messages (``batch_rows`` at most)
        when batching, else one request each."""
        bodies: list[dict[str, Any]] | None = None
        parts = [[k] for k in range(len(requests))]
        if self.batching and len(requests) > 1:
            bodies = [self._body(r, attempt, priority) for r in requests]
            groups: dict[str, list[int]] = {}
            for i, body in enumerate(bodies):
                groups.setdefault(batch_key(body), []).append(i)
            parts = [
                [members[k] for k in run]
                for members in groups.values()
                for run in chunks(len(members), self.batch_rows)
            ]
        with self._lock:
            self._queued += len(requests)
        futures = [
            self._pool.submit(
                self._answer_part,
                [requests[i] for i in part],
                None if bodies is None else [bodies[i] for i in part],
                attempt,
                priority,
            )
            for part in parts
        ]
        out: list[Completion | None] = [None] * len(requests)
        try:
            for part, future in zip(parts, futures, strict=True):
                for i, completion in zip(part, future.result(), strict=True):
                    out[i] = completion
        except BaseException:
            self.abort(requests)  # this try has failed: its other requests stop retrying
            wait(futures)
            raise
        done = [c for c in out if c is not None]
        assert len(done) == len(requests), "the parts cover every request once"
        return done

    def _answer_part(
        self,
        requests: list[LLMRequest],
        bodies: list[dict[str, Any]] | None,
        attempt: int,
        priority: int,
    ) -> list[Completion]:
        """One part of a try, on a request thread: its requests not aborted meanwhile are
        sent (:meth:`_send`), the others answered ``aborted``, as are those abort() cuts off."""
        aborted = Completion(None, "", 0, 0, error="aborted")
        with self._lock:
            self._queued -= len(requests)
            live = [k for k, r in enumerate(requests) if id(r) not in self._aborted]
            self._running += len(live)
            client = self._clients.current()
            for k in live:
                self._serving[id(requests[k])] = client
        out = [aborted] * len(requests)
        try:
            if live:
                done = self._send(
                    [requests[k] for k in live],
                    None if bodies is None else [bodies[k] for k in live],
                    attempt,
                    priority,
                )
                for k, completion in zip(live, done, strict=True):
                    out[k] = completion
            return out
        except BackendError:
            with self._lock:
                if all(id(requests[k]) in self._aborted for k in live):
                    return out  # cut off by abort(), not a server failure
            raise
        finally:
            with self._lock:
                self._running -= len(live)
                for k in live:
                    self._serving.pop(id(requests[k]), None)

    def _send(
        self,
        requests: list[LLMRequest],
        bodies: list[dict[str, Any]] | None,
        attempt: int,
        priority: int,
    ) -> list[Completion]:
        """One batch request (``bodies`` given), or one request a row: without bodies, where
        the server has no batch route (from then on) or refused this batch as a whole (one row
        may be at fault)."""
        if bodies is None or len(requests) == 1 or not self.batching:
            return [self._attempt(r, attempt, priority) for r in requests]
        ids = {id(r) for r in requests}
        try:
            data = self._post(
                BATCH_PATH,
                batch_body(bodies),
                stop=lambda: ids <= self._aborted,
                refused=NO_ROUTE + REFUSED,
            )
        except RouteRefused as err:
            if err.status in NO_ROUTE and self.batching:
                self.batching = False
                logger.warning(
                    "%s: the server has no batch route (%s); sending one request a row "
                    "(batch=off in the spec says so up front)", self.spec, err,
                )  # fmt: skip
            else:
                logger.info("%s: batch refused (%s); sending its rows one by one", self.spec, err)
            return [self._attempt(r, attempt, priority) for r in requests]
        try:
            answers = split_answer(data, bodies)
        except ValueError as err:
            raise BackendError(f"{self.spec}: unreadable batch answer: {err}") from None
        return [
            self._finish(request, answer, priority)
            for request, answer in zip(requests, answers, strict=True)
        ]

    def _attempt(self, request: LLMRequest, attempt: int, priority: int) -> Completion:
        return self._calibrated(request, self._scored(request, attempt, priority), priority)

    def _finish(self, request: LLMRequest, data: Any, priority: int) -> Completion:
        """A row's answer read from its share of a batch answer, calibrated."""
        done = read_completion(request, data, threshold=self.threshold)
        return self._calibrated(request, done, priority)

    def _calibrated(self, request: LLMRequest, done: Completion, priority: int) -> Completion:
        if request.output.task is Task.DECIDE and request.template is not None:
            # per-template calibration: the offset of content-free rows of this template
            offset = self._offsets.offset(request, lambda r: self._scored(r, 0, priority).score)
            done = calibrated(done, offset, self.threshold)
        return done

    def _body(self, request: LLMRequest, attempt: int, priority: int) -> dict[str, Any]:
        return chat_body(
            request,
            model=self.model,
            attempt=attempt,
            priority=priority if self.server_kind == "vllm" else 0,  # only vLLM schedules by it
            retry=self.retry,
            top_logprobs=self.top_logprobs,
            # llama-cpp-python's server takes a schema only in its json_object form
            schema_format="json_object" if self.server_kind == "llama.cpp" else "json_schema",
            structured=self.structured,
        )

    def _scored(self, request: LLMRequest, attempt: int, priority: int) -> Completion:
        body = self._body(request, attempt, priority)
        try:
            data = self._post("/chat/completions", body, stop=lambda: id(request) in self._aborted)
        except BackendError as err:
            if "response_format" in body and _REFUSED.search(str(err)):
                raise BackendError(
                    f"{self.spec}: the server refused the structured-output constraint "
                    f"(response_format) of a {request.output.sql_type} answer ({err}); use a "
                    "server with structured outputs (vLLM, llama.cpp's server), or add "
                    "structured=off to the backend spec to have answers generated free and parsed"
                ) from err
            raise
        return read_completion(request, data, threshold=self.threshold)

    def _post(
        self,
        path: str,
        body: dict[str, Any],
        *,
        stop: Callable[[], bool] | None = None,
        refused: tuple[int, ...] = (),
    ) -> Any:
        """POST and return the JSON answer, retrying transport failures per the policy; each
        try first waits on the rate limit (a 429 answer's try counts too: the server saw it).
        Time waiting on the limit is not the retry budget's: that bounds a failing server."""
        waited = [0.0]
        return call_with_retry(
            lambda _attempt: self._post_limited(path, body, stop, waited, refused),
            policy=self.transport_retry,
            what=self.spec,
            stop=stop,
            clock=lambda: time.monotonic() - waited[0],
        )

    def _post_limited(
        self,
        path: str,
        body: dict[str, Any],
        stop: Callable[[], bool] | None,
        waited: list[float],
        refused: tuple[int, ...] = (),
    ) -> Any:
        limiter = self.rate_limiter
        cost = 0
        if limiter is not None:
            cost = chat_cost(body)
            waited[0] += limiter.acquire(cost, stop=stop, what=self.spec)
        data = post_once(
            self._clients.current(), self.base_url, path, body, spec=self.spec, refused=refused
        )
        if limiter is not None:
            usage = data.get("usage") if isinstance(data, dict) else None
            if isinstance(usage, dict) and isinstance(usage.get("total_tokens"), int):
                limiter.settle(cost, usage["total_tokens"])
        return data

    def _root(self) -> str:
        return self.base_url.removesuffix("/v1")


def from_spec(spec: BackendSpec) -> OpenAIBackend:
    if not spec.target.startswith(("http://", "https://")):
        raise ConfigError(f"backend {spec.raw!r}: use openai:http://HOST:PORT/v1?model=NAME")
    key_env = spec.option("api_key_env")
    return OpenAIBackend(
        spec.target,
        model=spec.option("model") or None,
        api_key=key_from_env(key_env) if key_env else None,
        concurrency=spec.int_option("concurrency", 0) or None,
        timeout=spec.float_option("timeout", 60.0),
        threshold=spec.float_option("threshold", 0.0),
        top_logprobs=spec.int_option("top_logprobs", 20),
        structured=spec.on_off_option("structured", True),
        batch=spec.on_off_option("batch", True),
        batch_rows=spec.int_option("batch_rows", 64),
        transport_retry=policy_from_spec(spec),
        rate_limit=limit_from_spec(spec),
        spec=spec.raw,
    )
