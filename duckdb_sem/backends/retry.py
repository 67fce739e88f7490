"""Transport retries: one backoff policy with a bounded budget, shared by every backend.

A transport failure (timeout, connection reset, HTTP 408/429/5xx, a truncated or unreadable
response) is usually transient, so the call is tried again after an exponential backoff with
jitter, honouring ``Retry-After``. The policy bounds both the number of tries and the total
time spent on one request (waits included); when either runs out, the last failure is raised
as its :class:`~duckdb_sem.errors.BackendError` subclass, saying how often and how long it was
tried. Malformed *model output* is a different matter (a well-formed answer that does not
parse): see :class:`~duckdb_sem.backends.base.RetryPolicy`.

Example:
    >>> calls = []
    >>> def flaky(attempt: int) -> str:
    ...     calls.append(attempt)
    ...     if attempt < 2:
    ...         raise Transient(BackendError("HTTP 503"))
    ...     return "ok"
    >>> call_with_retry(flaky, policy=TransportRetry(backoff_s=0), what="test:")
    'ok'
    >>> calls
    [0, 1, 2]
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from duckdb_sem.backends.registry import BackendSpec, SpecOption
from duckdb_sem.errors import BackendError

__all__ = [
    "RETRYABLE_STATUS",
    "RETRY_OPTIONS",
    "TRANSPORT_RETRY",
    "Transient",
    "TransportRetry",
    "call_with_retry",
    "policy_from_spec",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: HTTP statuses worth another try: request timeout, rate limit, server-side failures.
RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class TransportRetry:
    """How a backend retries one request whose transport failed.

    ``retries`` tries after the first; the wait before try ``n`` is ``backoff_s * 2**n``
    capped at ``max_backoff_s``, with jitter (between half and all of it) so clients that
    failed together do not retry together; a server's ``Retry-After`` raises the wait. No try
    starts once ``budget_s`` (seconds since the first try, waits included) would be exceeded.
    """

    retries: int = 4
    backoff_s: float = 0.25
    max_backoff_s: float = 4.0
    budget_s: float = 60.0
    jitter: bool = True

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        base = min(self.max_backoff_s, self.backoff_s * (2**attempt))
        if self.jitter:
            base *= 0.5 + random.random() / 2
        return float(max(base, retry_after or 0.0))


TRANSPORT_RETRY = TransportRetry()


#: the spec options of :func:`policy_from_spec`, accepted by every networked backend
RETRY_OPTIONS = (
    SpecOption("retries", "transport retries after the first try (default 4)"),
    SpecOption("retry_budget", "seconds one request may spend on tries and waits (default 60)"),
    SpecOption("retry_backoff", "first backoff in seconds, doubled per retry (default 0.25)"),
)


def policy_from_spec(spec: BackendSpec) -> TransportRetry:
    """The policy a backend spec asks for: ``retries=4&retry_budget=60&retry_backoff=0.25``."""
    return TransportRetry(
        retries=max(0, spec.int_option("retries", TRANSPORT_RETRY.retries)),
        backoff_s=max(0.0, spec.float_option("retry_backoff", TRANSPORT_RETRY.backoff_s)),
        budget_s=max(0.0, spec.float_option("retry_budget", TRANSPORT_RETRY.budget_s)),
    )


class Transient(Exception):
    """Raised by the function under :func:`call_with_retry`: ``error`` may pass if tried again."""

    def __init__(self, error: BackendError, *, retry_after: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


def call_with_retry(
    fn: Callable[[int], T],
    *,
    policy: TransportRetry = TRANSPORT_RETRY,
    what: str,
    stop: Callable[[], bool] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``fn(attempt)`` until it returns, retrying :class:`Transient` failures per ``policy``.

    ``what`` names the backend in log lines; ``stop()`` true (the request was aborted) ends the
    retries at once with the last failure.
    """
    started = clock()
    attempt = 0
    while True:
        try:
            return fn(attempt)
        except Transient as failure:
            elapsed = clock() - started
            wait = policy.delay(attempt, failure.retry_after)
            if attempt >= policy.retries or elapsed + wait > policy.budget_s or (stop and stop()):
                err = failure.error
                raise type(err)(
                    f"{err} (tried {attempt + 1} time(s) in {elapsed:.1f} s; retry policy: "
                    f"{policy.retries} retries within {policy.budget_s:g} s)"
                ) from None
            log.info("%s: %s; retry %d in %.2f s", what, failure.error, attempt + 1, wait)
            sleep(wait)
            attempt += 1
