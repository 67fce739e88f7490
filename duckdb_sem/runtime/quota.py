"""Pools of LLM work shared by many queries: an operator's caps per session and per day.

A per-query budget (:mod:`.budget`) bounds one query; a :class:`Quota` bounds the sum over
every query that draws from it, so a client cannot spend without end by running many small
queries. The wire server gives each session its own quota and every session one daily quota
(it empties at midnight UTC; counters live in the server process, so a restart starts them
again). Before each SEU the budget draws the calls the cache does not answer, and their
estimated prompt tokens, from each quota of the query; a draw that would pass a cap fails the
query with :class:`~duckdb_sem.errors.BudgetExceededError` (SQLSTATE 54000) and takes nothing.

Example: ``Quota("this session", max_llm_calls=20, origin="duckdb-sem pgwire
--max-llm-calls-per-session")`` lets a session's queries make 20 backend calls in all; the
query whose next SEU would make the 21st fails, naming the cap and the flag that sets it.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable

from duckdb_sem.errors import BudgetExceededError, ConfigError

__all__ = ["Quota", "utc_today"]


def utc_today() -> dt.date:
    """The period of a daily quota: the UTC calendar day."""
    return dt.datetime.now(dt.UTC).date()


class Quota:
    """Calls and prompt tokens drawn by many queries, under caps (None: no cap); thread-safe.

    ``period`` (for a daily quota) names the current period; when it changes, the counters
    start again at zero. ``origin`` says who sets the caps, for messages (``{what}`` becomes
    ``llm-calls`` or ``prompt-tokens``).
    """

    def __init__(
        self,
        scope: str,
        *,
        max_llm_calls: int | None = None,
        max_prompt_tokens: int | None = None,
        origin: str = "",
        period: Callable[[], object] | None = None,
    ) -> None:
        caps = {"max_llm_calls": max_llm_calls, "max_prompt_tokens": max_prompt_tokens}
        for name, value in caps.items():
            if value is not None and value < 0:
                raise ConfigError(
                    f"{scope}: {name} must be >= 0 (or unset for no cap), got {value}"
                )
        self.scope = scope
        self.max_llm_calls = max_llm_calls
        self.max_prompt_tokens = max_prompt_tokens
        self.origin = origin
        self._period = period
        self._current = period() if period is not None else None
        self._calls = 0
        self._tokens = 0
        self._lock = threading.Lock()

    @property
    def limited(self) -> bool:
        return self.max_llm_calls is not None or self.max_prompt_tokens is not None

    def used(self) -> tuple[int, int]:
        """(calls, prompt tokens) drawn in the current period."""
        with self._lock:
            self._roll()
            return self._calls, self._tokens

    def draw(self, *, calls: int, tokens: int) -> None:
        """Take ``calls`` and ``tokens``, or raise (taking nothing) if that would pass a cap."""
        with self._lock:
            self._roll()
            if self.max_llm_calls is not None and self._calls + calls > self.max_llm_calls:
                raise BudgetExceededError(
                    f"{self.scope} has made {self._calls} of its {self.max_llm_calls} LLM calls "
                    f"(the server's cap, set by {self._origin('llm-calls')}) and the next batch "
                    f"needs {calls} more; the answers so far are cached. " + self._advice()
                )
            if (
                self.max_prompt_tokens is not None
                and self._tokens + tokens > self.max_prompt_tokens
            ):
                raise BudgetExceededError(
                    f"{self.scope} has sent about {self._tokens:,} of its "
                    f"{self.max_prompt_tokens:,} prompt tokens (the server's cap, set by "
                    f"{self._origin('prompt-tokens')}) and the next batch needs about "
                    f"{tokens:,} more; the answers so far are cached. " + self._advice()
                )
            self._calls += calls
            self._tokens += tokens

    def refund(self, *, calls: int, tokens: int) -> None:
        """Give back a draw that was not used (another quota of the same SEU refused it)."""
        with self._lock:
            self._calls = max(0, self._calls - calls)
            self._tokens = max(0, self._tokens - tokens)

    def _roll(self) -> None:
        if self._period is not None and (now := self._period()) != self._current:
            self._current, self._calls, self._tokens = now, 0, 0

    def _origin(self, what: str) -> str:
        return self.origin.format(what=what) if self.origin else "the operator"

    def _advice(self) -> str:
        if self._period is not None:
            return "It starts again at midnight UTC; or ask the server's operator to raise it."
        return "Start a new session, or ask the server's operator to raise it."
