"""``openai-embed:``: any OpenAI-compatible ``/v1/embeddings`` server (vLLM, OpenAI, the sim server).

Spec: ``openai-embed:http://127.0.0.1:8000/v1?model=NAME&timeout=60`` (plus the transport retry
options ``retries=``, ``retry_budget=``, ``retry_backoff=``, and ``rpm=``/``tpm=`` for a hosted
server's requests- and tokens-per-minute limits: each try waits on them before it is sent,
:mod:`.rate_limit`; a 429 is retried after its ``Retry-After``). One batch of texts is one POST
``{"model": NAME, "input": [texts...]}``; the answer's ``data[i].embedding`` is text ``i``'s
vector (ordered by ``data[i].index`` when the server gives it). The API key comes from
``DUCKDB_SEM_OPENAI_API_KEY``, else ``OPENAI_API_KEY`` (or ``api_key_env=``). The model and the
server kind come from ``/v1/models``; the sim server's vectors are SIMULATED and say so.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from duckdb_sem.backends.base import Answers, Capacity
from duckdb_sem.backends.embedder import Embedder
from duckdb_sem.backends.openai_server import check_status, discover, key_from_env
from duckdb_sem.backends.openai_wire import retry_after
from duckdb_sem.backends.rate_limit import (
    RATE_OPTIONS,
    RateLimit,
    RateLimiter,
    embed_cost,
    limit_from_spec,
)
from duckdb_sem.backends.registry import BackendSpec, SpecOption
from duckdb_sem.backends.retry import (
    RETRY_OPTIONS,
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

__all__ = ["OPTIONS", "OpenAIEmbedder", "from_spec", "read_embeddings"]

OPTIONS = (
    SpecOption("model", "served embedding model (default: the server's only model)", True),
    SpecOption("batch", "texts per request (default 64)"),
    SpecOption("timeout", "seconds to wait for one HTTP answer (default 60)"),
    SpecOption("api_key_env", "environment variable holding the API key"),
    *RETRY_OPTIONS,
    *RATE_OPTIONS,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenAIEmbedAnswers(Answers):
    server: str  # another server may serve another build under the same name


def read_embeddings(data: Any, count: int) -> list[list[float]]:
    """The vectors of an ``/embeddings`` answer, in input order; ``ValueError`` if malformed.

    Example:
        >>> read_embeddings({"data": [{"index": 1, "embedding": [0, 1]},
        ...                           {"index": 0, "embedding": [1, 0]}]}, 2)
        [[1.0, 0.0], [0.0, 1.0]]
    """
    try:
        items = list(data["data"])
        items.sort(key=lambda d: int(d.get("index", 0)))
        vectors = [[float(x) for x in item["embedding"]] for item in items]
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise ValueError(f"not an embeddings answer ({type(err).__name__}: {err})") from None
    if len(vectors) != count:
        raise ValueError(f"{len(vectors)} vectors for {count} texts")
    return vectors


class OpenAIEmbedder(Embedder):
    """A client of one embedding model on one OpenAI-compatible server."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        batch: int = 64,
        timeout: float = 60.0,
        transport_retry: TransportRetry = TRANSPORT_RETRY,
        transport: httpx.BaseTransport | None = None,
        rate_limit: RateLimit | None = None,
        spec: str | None = None,
    ) -> None:
        #: every HTTP try waits on it before it is sent (None: no client-side limit)
        self.rate_limiter = (
            None if rate_limit is None or rate_limit.unlimited else RateLimiter(rate_limit)
        )
        url = base_url.rstrip("/")
        self.base_url = url if url.endswith("/v1") else url + "/v1"
        self.spec = spec or f"openai-embed:{self.base_url}"
        key = api_key if api_key is not None else key_from_env()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.Client(headers=headers, timeout=timeout, transport=transport)
        self.batch = max(1, batch)
        self.transport_retry = transport_retry
        try:
            self.model, self.server_kind = discover(
                self._http, self.base_url, model, spec=self.spec
            )
            self.dimensions = len(self._post(["dimension probe"])[0])
        except BaseException:
            self._http.close()
            raise
        self.answers = OpenAIEmbedAnswers(kind="openai-embed", model=self.model,
                                          server=self.base_url)  # fmt: skip

    @property
    def simulated(self) -> bool:  # type: ignore[override]
        return self.server_kind == "sim"

    def capacity(self) -> Capacity:
        # one request at a time: a shared httpx pool is unsafe under many threads
        # (see connections.py), and one batch of texts is one request
        return Capacity(max_batch=self.batch)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self._post(list(texts))

    def close(self) -> None:
        self._http.close()

    def _post(self, texts: list[str]) -> list[list[float]]:
        """POST ``texts``, retrying transport failures per the policy; each try first waits
        on the rate limit (as ``openai:``'s do: that wait is not the retry budget's)."""
        body = {"model": self.model, "input": texts}
        waited = [0.0]
        return call_with_retry(
            lambda _attempt: self._limited(body, len(texts), waited),
            policy=self.transport_retry,
            what=self.spec,
            clock=lambda: time.monotonic() - waited[0],
        )

    def _limited(self, body: dict[str, Any], count: int, waited: list[float]) -> list[list[float]]:
        limiter = self.rate_limiter
        if limiter is None:
            return self._once(body, count)[0]
        cost = embed_cost(body)
        waited[0] += limiter.acquire(cost, what=self.spec)
        vectors, used = self._once(body, count)
        if used is not None:
            limiter.settle(cost, used)
        return vectors

    def _once(self, body: dict[str, Any], count: int) -> tuple[list[list[float]], int | None]:
        """The vectors of one try, and the tokens the server says it counted (None: unsaid)."""
        url = self.base_url + "/embeddings"
        try:
            resp = self._http.post(url, json=body)
        except httpx.TimeoutException as err:
            raise Transient(
                BackendTimeoutError(f"{self.spec}: no answer in time ({err})")
            ) from None
        except httpx.TransportError as err:
            raise Transient(
                BackendUnavailableError(f"{self.spec}: lost {self.base_url} ({err})")
            ) from None
        if resp.status_code in RETRYABLE_STATUS:
            raise Transient(
                BackendError(f"{self.spec}: HTTP {resp.status_code} from {url}"),
                retry_after=retry_after(resp),
            )
        check_status(resp, self.spec)
        try:
            data = resp.json()
            usage = data.get("usage") if isinstance(data, dict) else None
            used = usage.get("total_tokens") if isinstance(usage, dict) else None
            return read_embeddings(data, count), used if isinstance(used, int) else None
        except ValueError as err:
            raise Transient(
                BackendError(f"{self.spec}: unreadable answer from {url}: {err}")
            ) from None


def from_spec(spec: BackendSpec) -> OpenAIEmbedder:
    if not spec.target.startswith(("http://", "https://")):
        raise ConfigError(f"backend {spec.raw!r}: use openai-embed:http://HOST:PORT/v1?model=NAME")
    key_env = spec.option("api_key_env")
    return OpenAIEmbedder(
        spec.target,
        model=spec.option("model") or None,
        api_key=key_from_env(key_env) if key_env else None,
        batch=spec.int_option("batch", 64),
        timeout=spec.float_option("timeout", 60.0),
        transport_retry=policy_from_spec(spec),
        rate_limit=limit_from_spec(spec),
        spec=spec.raw,
    )
