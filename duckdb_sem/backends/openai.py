"""``openai:``: any OpenAI-compatible server (vLLM, llama.cpp's server, the sim server).

Spec: ``openai:http://127.0.0.1:8000/v1?model=NAME&concurrency=32&timeout=60&threshold=0``
(plus ``retries=4&retry_budget=60&retry_backoff=0.25``).
The API key comes from ``DUCKDB_SEM_OPENAI_API_KEY``, else ``OPENAI_API_KEY`` (or the variable
named by ``api_key_env=``); it never goes in the spec, which is logged.

Decisions ask for one token with ``logprobs``/``top_logprobs`` and compare the summed
probability of yes-tokens against no-tokens (score = log-odds, yes when above ``threshold``),
so a model that answers "Yes." or " yes" is read correctly and free text is never searched.
Generation is parsed into the requested type; malformed output is retried per
:data:`~duckdb_sem.backends.base.RETRY_POLICY` (new seed, higher temperature), then NULL.
Transport failures (timeouts, resets, HTTP 408/429/5xx, truncated or unreadable responses) are
retried with backoff per :data:`~duckdb_sem.backends.retry.TRANSPORT_RETRY` (spec options
``retries=`` and ``retry_budget=`` seconds), then raised naming this backend.

The server kind is read from ``/v1/models`` (``owned_by``): with vLLM, load comes from its
Prometheus ``/metrics``, token counts from ``/tokenize``, and non-zero request priorities are
sent (the server needs ``--scheduling-policy priority``); vLLM's automatic prefix caching
reuses the shared prefix because it is always sent first, as the system message.
"""

from __future__ import annotations

import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

import httpx

from duckdb_sem.backends.base import RETRY_POLICY, Backend, Capacity, Load, RetryPolicy
from duckdb_sem.backends.connections import ThreadClients
from duckdb_sem.backends.registry import BackendSpec
from duckdb_sem.backends.retry import (
    RETRYABLE_STATUS,
    TRANSPORT_RETRY,
    Transient,
    TransportRetry,
    call_with_retry,
    policy_from_spec,
)
from duckdb_sem.errors import (
    BackendError,
    BackendTimeoutError,
    BackendUnavailableError,
    ConfigError,
)
from duckdb_sem.llm.outputs import OutputParseError, parse_type
from duckdb_sem.llm.request import Completion, LLMRequest, Task

__all__ = ["API_KEY_ENV", "OpenAIBackend", "decide_from_logprobs", "from_spec"]

logger = logging.getLogger(__name__)

API_KEY_ENV = ("DUCKDB_SEM_OPENAI_API_KEY", "OPENAI_API_KEY")
# server kind -> (tokenizer route, field holding the text)
_TOKENIZE = {
    "vllm": ("/tokenize", "prompt"),
    "sim": ("/tokenize", "prompt"),
    "llama.cpp": ("/extras/tokenize/count", "input"),
}
_OWNERS = {"vllm": "vllm", "duckdb-sem-sim": "sim", "me": "llama.cpp"}
_YES = {"yes", "y", "true"}
_NO = {"no", "n", "false"}
_METRIC = re.compile(r"^vllm:num_requests_(running|waiting)(?:\{[^}]*\})?\s+([0-9.eE+-]+)$")


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


def _norm(token: str) -> str:
    return re.sub(r"[^a-z]", "", token.lower())


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


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
        retry: RetryPolicy = RETRY_POLICY,
        transport_retry: TransportRetry = TRANSPORT_RETRY,
        transport: httpx.BaseTransport | None = None,
        spec: str | None = None,
    ) -> None:
        url = base_url.rstrip("/")
        self.base_url = url if url.endswith("/v1") else url + "/v1"
        self.spec = spec or f"openai:{self.base_url}"
        self.threshold = threshold
        self.top_logprobs = top_logprobs
        self.retry = retry
        self.transport_retry = transport_retry
        key = api_key if api_key is not None else _key_from_env()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        # each request thread its own connection (see connections.py: httpcore's shared pool
        # can close a connection under a request, which then hangs to its read timeout)
        self._clients = ThreadClients(headers=headers, timeout=timeout, transport=transport)
        self._http = self._clients.shared  # discovery, /metrics, /tokenize
        try:
            self.model, self.server_kind = self._discover(model)
        except BaseException:
            self._clients.close()  # do not leak the connections of a backend never returned
            raise
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
        self._token_cache: dict[str, int] = {}
        self._metrics: tuple[float, Load] = (0.0, Load())
        self.warnings = 0
        logger.info("%s: model %s on a %s server", self.spec, self.model, self.server_kind)

    @property
    def simulated(self) -> bool:  # type: ignore[override]
        return self.server_kind == "sim"

    @property
    def backend_id(self) -> str:
        return f"openai:{self.base_url}:{self.model}"

    def capacity(self) -> Capacity:
        return Capacity(max_batch=self.concurrency, max_concurrent_batches=2)

    def load(self) -> Load:
        """The server's own queue gauges when it exports them (vLLM, sim), else client counts."""
        if self.server_kind in ("vllm", "sim"):
            if time.monotonic() - self._metrics[0] > 0.5:  # at most two scrapes a second
                try:
                    resp = self._http.get(self._root() + "/metrics")
                    resp.raise_for_status()
                    self._metrics = (time.monotonic(), _parse_gauges(resp.text))
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
        count = max(len(text.split()), (len(text) + 3) // 4)  # estimate: ~4 characters a token
        route = _TOKENIZE.get(self.server_kind)
        if route is not None:
            try:
                body = {"model": self.model, route[1]: text}
                count = int(self._http.post(self._root() + route[0], json=body).json()["count"])
            except (httpx.HTTPError, KeyError, ValueError):
                logger.debug("%s: server tokenizer unavailable; estimating", self.spec)
        if len(self._token_cache) < 100_000:
            self._token_cache[text] = count
        return count

    def abort(self, requests: Sequence[LLMRequest]) -> None:
        """Requests not yet sent are dropped (answered with an ``aborted`` error)."""
        with self._lock:
            self._aborted.update(id(r) for r in requests)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._clients.close()

    def complete(self, requests: Sequence[LLMRequest], *, priority: int = 0) -> list[Completion]:
        with self._lock:
            self._queued += len(requests)
        futures = [self._pool.submit(self._answer, r, priority) for r in requests]
        try:
            results = [f.result() for f in futures]
        except BaseException:
            self.abort(requests)  # the batch has failed: its other requests stop retrying
            wait(futures)
            raise
        finally:
            with self._lock:
                self._aborted.difference_update(id(r) for r in requests)
        failed = sum(1 for c in results if c.error is not None and c.error != "aborted")
        if failed:
            with self._lock:
                self.warnings += failed
            logger.warning("%s: %d request(s) answered NULL after retries", self.spec, failed)
        return results

    def _answer(self, request: LLMRequest, priority: int) -> Completion:
        with self._lock:
            self._queued -= 1
            if id(request) in self._aborted:
                return Completion(None, "", 0, 0, error="aborted")
            self._running += 1
        try:
            last = Completion(None, "", 0, 0, error="no attempt")
            for attempt in range(self.retry.attempts + 1):
                last = self._attempt(request, attempt, priority)
                if last.error is None:
                    break
            return last
        finally:
            with self._lock:
                self._running -= 1

    def _attempt(self, request: LLMRequest, attempt: int, priority: int) -> Completion:
        params = request.params
        messages = [{"role": "user", "content": request.row}]
        if request.prefix:
            messages.insert(0, {"role": "system", "content": request.prefix})
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": params.temperature if attempt == 0 else self.retry.retry_temperature,
            "seed": params.seed + attempt,
            "max_tokens": params.max_tokens,
        }
        if priority and self.server_kind == "vllm":
            body["priority"] = priority
        decide = request.output.task is Task.DECIDE
        if decide:
            body.update(max_tokens=1, logprobs=True, top_logprobs=self.top_logprobs)
        data = self._post("/chat/completions", body, stop=lambda: id(request) in self._aborted)
        choice, usage = data["choices"][0], data.get("usage") or {}
        text = str((choice.get("message") or {}).get("content") or "")
        tokens = (int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)))
        if decide:
            try:
                content = (choice.get("logprobs") or {}).get("content") or [{"top_logprobs": []}]
                pairs = [(a["token"], float(a["logprob"])) for a in content[0]["top_logprobs"]]
            except (KeyError, IndexError, TypeError, ValueError, AttributeError):
                pairs = []  # unreadable log-probabilities: no decision, retried below
            score = decide_from_logprobs(pairs) if pairs else None
            if score is None:
                error = f"no yes/no token among the top log-probabilities (answer {text!r})"
                return Completion(None, text, *tokens, error=error)
            return Completion(score > self.threshold, text, *tokens, score=score)
        try:
            return Completion(parse_type(request.output.sql_type).parse(text), text, *tokens)
        except OutputParseError as err:
            return Completion(None, text, *tokens, error=str(err))

    def _post(
        self, path: str, body: dict[str, Any], *, stop: Callable[[], bool] | None = None
    ) -> Any:
        """POST and return the JSON answer, retrying transport failures per the policy."""
        return call_with_retry(
            lambda _attempt: self._post_once(path, body),
            policy=self.transport_retry,
            what=self.spec,
            stop=stop,
        )

    def _post_once(self, path: str, body: dict[str, Any]) -> Any:
        try:
            resp = self._clients.current().post(self.base_url + path, json=body)
        except httpx.TimeoutException as err:
            raise Transient(
                BackendTimeoutError(f"{self.spec}: no answer in time ({type(err).__name__})")
            ) from None
        except httpx.TransportError as err:
            raise Transient(
                BackendUnavailableError(
                    f"{self.spec}: lost {self.base_url} ({type(err).__name__}: {err})"
                )
            ) from None
        if resp.status_code in RETRYABLE_STATUS:
            raise Transient(
                BackendError(
                    f"{self.spec}: HTTP {resp.status_code} from {resp.url}: {resp.text[:200]}"
                ),
                retry_after=_retry_after(resp),
            )
        self._check(resp)
        try:
            data = resp.json()
            if not isinstance(data["choices"][0], dict):
                raise TypeError("choices[0] is not an object")
        except (ValueError, KeyError, IndexError, TypeError) as err:
            raise Transient(
                BackendError(
                    f"{self.spec}: unreadable answer from {resp.url} "
                    f"({type(err).__name__}: {err}): {resp.text[:120]!r}"
                )
            ) from None
        return data

    def _check(self, resp: httpx.Response) -> None:
        if resp.status_code in (401, 403):
            raise BackendUnavailableError(
                f"{self.spec}: the server rejected the API key (HTTP {resp.status_code}); set "
                f"{API_KEY_ENV[0]} (or {API_KEY_ENV[1]}) to a key it accepts"
            )
        if resp.status_code >= 400:
            raise BackendError(
                f"{self.spec}: HTTP {resp.status_code} from {resp.url}: {resp.text[:300]}"
            )

    def _discover(self, model: str | None) -> tuple[str, str]:
        try:
            resp = self._http.get(self.base_url + "/models")
        except httpx.TransportError as err:
            msg = f"cannot reach {self.base_url} ({err}); start the server or fix {self.spec!r}"
            raise BackendUnavailableError(msg) from None
        self._check(resp)
        served = resp.json().get("data") or []
        names = [str(m.get("id")) for m in served]
        owners = {str(m.get("id")): str(m.get("owned_by", "")) for m in served}
        if model is None:
            if len(names) != 1:
                raise ConfigError(
                    f"{self.spec}: name the model with ?model=; the server serves {names}"
                )
            model = names[0]
        elif model not in names:
            raise ConfigError(
                f"{self.spec}: model {model!r} is not served at {self.base_url}; it serves "
                f"{', '.join(names) or 'nothing'}"
            )
        return model, _OWNERS.get(owners.get(model, ""), "generic")

    def _root(self) -> str:
        return self.base_url.removesuffix("/v1")


def _retry_after(resp: httpx.Response) -> float | None:
    """Seconds from a ``Retry-After`` header (only the delay-seconds form), capped at 30."""
    try:
        return min(30.0, max(0.0, float(resp.headers.get("retry-after", ""))))
    except ValueError:
        return None


def _parse_gauges(text: str) -> Load:
    values = {"waiting": 0.0, "running": 0.0}
    for line in text.splitlines():
        match = _METRIC.match(line.strip())
        if match:
            values[match.group(1)] += float(match.group(2))
    return Load(queued=int(values["waiting"]), running=int(values["running"]))


def _key_from_env(name: str | None = None) -> str | None:
    for var in (name,) if name else API_KEY_ENV:
        value = os.environ.get(var)
        if value:
            return value
    return None


def from_spec(spec: BackendSpec) -> OpenAIBackend:
    if not spec.target.startswith(("http://", "https://")):
        raise ConfigError(f"backend {spec.raw!r}: use openai:http://HOST:PORT/v1?model=NAME")
    key_env = spec.option("api_key_env")
    return OpenAIBackend(
        spec.target,
        model=spec.option("model") or None,
        api_key=_key_from_env(key_env) if key_env else None,
        concurrency=spec.int_option("concurrency", 0) or None,
        timeout=spec.float_option("timeout", 60.0),
        threshold=spec.float_option("threshold", 0.0),
        transport_retry=policy_from_spec(spec),
        spec=spec.raw,
    )
