"""Pools of LLM work shared by many queries: caps per session and per day.

A per-query budget (:mod:`.budget`) bounds one query; a :class:`Quota` bounds the sum over
every query that draws from it, so a client cannot spend without end by running many small
queries. The wire server gives each session its own quota and every session one daily quota
(it empties at midnight UTC; counters live in the server process, so a restart starts them
again). Before each SEU the budget draws the calls the cache does not answer, and their
estimated prompt tokens, from each quota of the query; a draw that would pass a cap fails the
query with :class:`~duckdb_sem.errors.BudgetExceededError` (SQLSTATE 54000) and takes nothing.
Money is drawn the same way: each SEU's bound in USD (:mod:`.money`). A connection's own
session caps (``max_llm_calls_per_session``, ...) are a quota too, shared by its cursors:
:meth:`Quota.capped` gives the same counters other caps, as ``SET`` does.

Example: ``Quota("this session", max_llm_calls=20, origin="duckdb-sem pgwire
--max-llm-calls-per-session")`` lets a session's queries make 20 backend calls in all; the
query whose next SEU would make the 21st fails, naming the cap and the flag that sets it.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable

from duckdb_sem.errors import BudgetExceededError, ConfigError
from duckdb_sem.optimizer.spend import format_dollars as dollars

__all__ = ["OPERATOR_ADVICE", "Quota", "utc_today"]

#: the advice of an operator's quota: a client can only wait or ask
OPERATOR_ADVICE = "Start a new session, or ask the server's operator to raise it."
_DAILY_ADVICE = "It starts again at midnight UTC; or ask the server's operator to raise it."


def utc_today() -> dt.date:
    """The period of a daily quota: the UTC calendar day."""
    return dt.datetime.now(dt.UTC).date()


class _Counts:
    """What a quota's queries drew in its current period; shared by :meth:`Quota.capped`."""

    def __init__(self, period: Callable[[], object] | None) -> None:
        self.period = period
        self.current = period() if period is not None else None
        self.calls = 0
        self.tokens = 0
        self.cost = 0.0
        self.lock = threading.Lock()

    def roll(self) -> None:
        if self.period is not None and (now := self.period()) != self.current:
            self.current, self.calls, self.tokens, self.cost = now, 0, 0, 0.0


class Quota:
    """Calls, prompt tokens and USD drawn by many queries, under caps (None: no cap);
    thread-safe.

    ``period`` (for a daily quota) names the current period; when it changes, the counters
    start again at zero. ``origin`` says who sets the caps, for messages (``{what}`` becomes
    ``llm-calls``, ``prompt-tokens`` or ``cost``; ``{setting}`` ``llm_calls``, ...);
    ``whose`` names the cap (``the server's cap``) and ``advice(setting)`` ends the message
    (default: ask the server's operator).
    """

    def __init__(
        self,
        scope: str,
        *,
        max_llm_calls: int | None = None,
        max_prompt_tokens: int | None = None,
        max_cost: float | None = None,
        origin: str = "",
        period: Callable[[], object] | None = None,
        whose: str = "the server's cap",
        advice: Callable[[str], str] | None = None,
        _counts: _Counts | None = None,
    ) -> None:
        caps = {"max_llm_calls": max_llm_calls, "max_prompt_tokens": max_prompt_tokens,
                "max_cost": max_cost}  # fmt: skip
        for name, value in caps.items():
            if value is not None and not value >= 0:
                raise ConfigError(
                    f"{scope}: {name} must be >= 0 (or unset for no cap), got {value}"
                )
        self.scope = scope
        self.max_llm_calls = max_llm_calls
        self.max_prompt_tokens = max_prompt_tokens
        self.max_cost = max_cost
        self.origin = origin
        self.whose = whose
        self.advice = advice
        self._counts = _counts if _counts is not None else _Counts(period)

    @property
    def limited(self) -> bool:
        return any(c is not None for c in (self.max_llm_calls, self.max_prompt_tokens,
                                           self.max_cost))  # fmt: skip

    def capped(self, **caps: float | None) -> Quota:
        """This quota with other caps (``max_llm_calls=``, ``max_prompt_tokens=``,
        ``max_cost=``), drawing from the same counters."""
        now = {"max_llm_calls": self.max_llm_calls, "max_prompt_tokens": self.max_prompt_tokens,
               "max_cost": self.max_cost, **caps}  # fmt: skip
        return Quota(
            self.scope,
            max_llm_calls=None if now["max_llm_calls"] is None else int(now["max_llm_calls"]),
            max_prompt_tokens=(
                None if now["max_prompt_tokens"] is None else int(now["max_prompt_tokens"])
            ),
            max_cost=now["max_cost"],
            origin=self.origin,
            whose=self.whose,
            advice=self.advice,
            _counts=self._counts,
        )

    def used(self) -> tuple[int, int]:
        """(calls, prompt tokens) drawn in the current period."""
        with self._counts.lock:
            self._counts.roll()
            return self._counts.calls, self._counts.tokens

    def spent(self) -> float:
        """USD drawn in the current period."""
        with self._counts.lock:
            self._counts.roll()
            return self._counts.cost

    def draw(self, *, calls: int, tokens: int, cost: float = 0.0) -> None:
        """Take ``calls``, ``tokens`` and ``cost`` (USD), or raise (taking nothing) if that
        would pass a cap."""
        c = self._counts
        with c.lock:
            c.roll()
            if self.max_llm_calls is not None and c.calls + calls > self.max_llm_calls:
                raise BudgetExceededError(
                    f"{self.scope} has made {c.calls} of its {self.max_llm_calls} LLM calls "
                    f"({self.whose}, set by {self._origin('llm-calls')}) and the next batch "
                    f"needs {calls} more; the answers so far are cached. "
                    + self._advice("llm-calls")
                )
            if self.max_prompt_tokens is not None and c.tokens + tokens > self.max_prompt_tokens:
                raise BudgetExceededError(
                    f"{self.scope} has sent about {c.tokens:,} of its "
                    f"{self.max_prompt_tokens:,} prompt tokens ({self.whose}, set by "
                    f"{self._origin('prompt-tokens')}) and the next batch needs about "
                    f"{tokens:,} more; the answers so far are cached. "
                    + self._advice("prompt-tokens")
                )
            if self.max_cost is not None and cost > 0 and c.cost + cost > self.max_cost:
                raise BudgetExceededError(
                    f"{self.scope} has spent {dollars(c.cost)} of its {dollars(self.max_cost)} "
                    f"({self.whose}, set by {self._origin('cost')}) and the next batch may "
                    f"cost up to {dollars(cost)} more; the answers so far are cached. "
                    + self._advice("cost")
                )
            c.calls += calls
            c.tokens += tokens
            c.cost += cost

    def add(self, *, calls: int, tokens: int, cost: float) -> None:
        """Count work done without a draw (no cap was set when it was sent)."""
        c = self._counts
        with c.lock:
            c.roll()
            c.calls += calls
            c.tokens += tokens
            c.cost += cost

    def refund(self, *, calls: int, tokens: int, cost: float = 0.0) -> None:
        """Give back a draw that was not used (another quota of the same SEU refused it)."""
        c = self._counts
        with c.lock:
            c.calls = max(0, c.calls - calls)
            c.tokens = max(0, c.tokens - tokens)
            c.cost = max(0.0, c.cost - cost)

    def settle(self, *, cost: float) -> None:
        """Replace a drawn bound by what was spent: ``cost`` is the spent minus the bound
        (negative: the batch cost less than its bound)."""
        c = self._counts
        with c.lock:
            c.cost = max(0.0, c.cost + cost)

    def restart(self, what: str) -> None:
        """Start counting ``what`` (``llm_calls``, ``prompt_tokens`` or ``cost``) again at zero:
        what ``RESET duckdb_sem.max_<what>_per_session`` does to a connection's session."""
        c = self._counts
        with c.lock:
            if what == "llm_calls":
                c.calls = 0
            elif what == "prompt_tokens":
                c.tokens = 0
            else:
                c.cost = 0.0

    def _origin(self, what: str) -> str:
        if not self.origin:
            return "the operator"
        return self.origin.format(what=what, setting=what.replace("-", "_"))

    def _advice(self, what: str) -> str:
        if self.advice is not None:
            return self.advice(what.replace("-", "_"))
        return _DAILY_ADVICE if self._counts.period is not None else OPERATOR_ADVICE
