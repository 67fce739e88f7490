"""Requests- and tokens-per-minute limits: a token bucket per backend instance.

Hosted servers refuse work above a rate (HTTP 429); a client that keeps under the rate never
sees one. ``openai:...?rpm=600&tpm=90000`` gives the backend a :class:`RateLimiter` that each
HTTP try waits on before it is sent, costing one request and its estimated tokens (prompt
plus the most it may generate); a server reporting more usage than that is charged the rest.
Less is never given back: a hosted server may count the estimate at admission, as OpenAI
documents, and a refund would then send more than it admits.
``openai-embed:...?rpm=&tpm=`` limits an embedding server's requests the same way, each
costing its texts' estimated tokens (:func:`embed_cost`). The SIMULATED server
(``duckdb-sem sim-server --rpm N --tpm N``) enforces the same buckets on completions and
embeddings, answering 429 with ``Retry-After`` instead of waiting.

Each bucket refills continuously at ``limit / 60`` per second and holds at most one second of
it (at least one request, or the cost of the one request asking): a smooth rate, not a
minute's burst, so a client under a server's limit stays under it in every window. A request
costing more tokens than a full bucket is let through when the bucket is full and leaves it
in debt, so it is delayed, never refused.

Example:
    >>> now = [0.0]
    >>> limiter = RateLimiter(RateLimit(rpm=120), clock=lambda: now[0])
    >>> limiter.reserve(), limiter.reserve(), limiter.reserve()  # 2 a second: the third waits
    (0.0, 0.0, 0.5)
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from duckdb_sem.backends.registry import BackendSpec, SpecOption
from duckdb_sem.backends.tokens import estimate_tokens
from duckdb_sem.errors import BackendError, ConfigError

__all__ = [
    "RATE_OPTIONS",
    "RateLimit",
    "RateLimiter",
    "chat_cost",
    "embed_cost",
    "limit_from_spec",
]

#: the spec options of :func:`limit_from_spec`
RATE_OPTIONS = (
    SpecOption(
        "rpm", "requests per minute sent at most, waited for before sending (default: none)"
    ),
    SpecOption(
        "tpm",
        "tokens per minute (estimated prompt + max completion) sent at most (default: none)",
    ),
)


@dataclass(frozen=True, slots=True)
class RateLimit:
    """Requests and tokens per minute; None: that one is not limited."""

    rpm: float | None = None
    tpm: float | None = None

    def __post_init__(self) -> None:
        for name in ("rpm", "tpm"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                what = "requests" if name == "rpm" else "tokens"
                raise ConfigError(f"{name}={value}: give the {what} per minute, a number > 0")

    @property
    def unlimited(self) -> bool:
        return self.rpm is None and self.tpm is None


def limit_from_spec(spec: BackendSpec) -> RateLimit:
    """The limit a backend spec asks for (``rpm=``, ``tpm=``; absent or 0: none)."""
    rpm = spec.float_option("rpm", 0.0)
    tpm = spec.float_option("tpm", 0.0)
    if rpm < 0 or tpm < 0:
        raise ConfigError(f"backend {spec.raw!r}: rpm= and tpm= must be >= 0 (0: no limit)")
    return RateLimit(rpm=rpm or None, tpm=tpm or None)


def chat_cost(body: dict[str, Any]) -> int:
    """A chat or completion request's estimated cost in tokens: its text plus the most it may
    generate (what a limit must assume before the server says what it used). A batch request
    (``messages`` a list of conversations) costs the sum of its conversations'."""
    messages = body.get("messages") or []
    conversations = [m for m in messages if isinstance(m, list)] or [messages]
    text = "\n".join(
        str(m.get("content", "")) for c in conversations for m in c if isinstance(m, dict)
    )
    text += str(body.get("prompt") or "")
    most = body.get("max_tokens") or body.get("max_completion_tokens") or 0
    most = int(most) if isinstance(most, int | float) else 0
    return estimate_tokens(text) + most * len(conversations)


def embed_cost(body: dict[str, Any]) -> int:
    """An ``/embeddings`` request's estimated cost in tokens: its input texts' (one string or a
    list of them; an embedding generates nothing)."""
    texts = body.get("input") or []
    texts = [texts] if isinstance(texts, str) else texts
    return sum(estimate_tokens(str(t)) for t in texts)


class _Bucket:
    """One token bucket (not thread-safe: :class:`RateLimiter` holds the lock)."""

    def __init__(self, per_minute: float, now: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(self.rate, 1.0)  # one second of the rate, at least one unit
        self.level = self.capacity
        self.at = now

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
        self.at = now

    def wait_for(self, cost: float) -> float:
        """Seconds until ``cost`` may be taken (a cost above capacity needs a full bucket)."""
        need = min(cost, self.capacity)
        return 0.0 if self.level >= need - 1e-9 else (need - self.level) / self.rate


class RateLimiter:
    """The buckets of one :class:`RateLimit`; thread-safe; clock and sleep injectable."""

    def __init__(
        self,
        limit: RateLimit,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.limit = limit
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        now = clock()
        self._requests = None if limit.rpm is None else _Bucket(limit.rpm, now)
        self._tokens = None if limit.tpm is None else _Bucket(limit.tpm, now)
        #: seconds callers of :meth:`acquire` have waited in all (what EXPLAIN ANALYZE may show)
        self.waited_s = 0.0

    def reserve(self, tokens: int = 0) -> float:
        """Take one request and ``tokens`` now and return 0, or take nothing and return the
        seconds until both buckets would allow it."""
        with self._lock:
            now = self._clock()
            wait = 0.0
            for bucket, cost in ((self._requests, 1.0), (self._tokens, float(tokens))):
                if bucket is not None:
                    bucket.refill(now)
                    wait = max(wait, bucket.wait_for(cost))
            if wait > 0:
                return wait
            if self._requests is not None:
                self._requests.level -= 1.0
            if self._tokens is not None:
                self._tokens.level -= tokens
            return 0.0

    def acquire(
        self, tokens: int = 0, *, stop: Callable[[], bool] | None = None, what: str = ""
    ) -> float:
        """Wait until one request of ``tokens`` may be sent, take it, and return the seconds
        waited. ``stop()`` true (the request was aborted) raises a :class:`BackendError`
        instead of waiting on."""
        waited = 0.0
        while True:
            wait = self.reserve(tokens)
            if wait <= 0:
                return waited
            if stop is not None and stop():
                raise BackendError(f"{what}: aborted while waiting on its rate limit")
            self._sleep(wait)
            waited += wait
            with self._lock:
                self.waited_s += wait

    def settle(self, reserved: int, used: int) -> None:
        """The server counted ``used`` tokens of a request that reserved ``reserved``: take what
        the estimate missed (never give back: see the module docstring)."""
        if self._tokens is None or used <= reserved:
            return
        with self._lock:
            self._tokens.level -= used - reserved
