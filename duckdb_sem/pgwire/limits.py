"""A wire server's operator limits: caps no client ``SET`` can raise, a session's and a day's.

``duckdb-sem pgwire --max-llm-calls-per-query 300`` caps ``duckdb_sem.max_llm_calls``: a
session starts at 300, may ``SET`` it lower (``SET duckdb_sem.max_llm_calls = 50`` applies),
and ``SET`` above it or to ``NULL`` fails with 22023 naming the cap and the flag; ``RESET``
goes back to 300, not to unlimited. Without the flag, the process's
``DUCKDB_SEM_MAX_LLM_CALLS`` is the cap (an operator who set it meant it). The same holds for
prompt tokens and for money (``--max-cost-per-query 0.50``, USD at the models' prices,
``duckdb_sem.max_cost``). ``--max-llm-calls-per-session`` and ``--max-llm-calls-per-day`` (and
their prompt-token and cost twins) bound the sum over a session's queries and over every
session's queries in a UTC day (:class:`~duckdb_sem.runtime.quota.Quota`, SQLSTATE 54000 once
spent); a per-session cap is also the ceiling of the client's own
``duckdb_sem.max_<what>_per_session``.

:class:`Limiter` is built once per server (it holds the day's quota); each session has a
:class:`SessionLimits`, which keeps the session's budget across a reconnect of its DuckDB
cursor (after a cancel), so neither a lowered setting nor the session's count is lost.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

from duckdb_sem.config import Settings
from duckdb_sem.errors import ConfigError
from duckdb_sem.runtime.budget import SETTINGS as BUDGET_SETTINGS
from duckdb_sem.runtime.budget import Budget, Ceiling, session_quota
from duckdb_sem.runtime.quota import Quota, utc_today
from duckdb_sem.session.connection import SemConnection

__all__ = ["Limiter", "OperatorLimits", "SessionLimits"]


@dataclass(frozen=True, slots=True)
class OperatorLimits:
    """The operator's caps (None: none), as ``duckdb-sem pgwire --max-<field>`` sets them."""

    llm_calls_per_query: int | None = None
    prompt_tokens_per_query: int | None = None
    llm_calls_per_session: int | None = None
    prompt_tokens_per_session: int | None = None
    llm_calls_per_day: int | None = None
    prompt_tokens_per_day: int | None = None
    cost_per_query: float | None = None  # USD
    cost_per_session: float | None = None
    cost_per_day: float | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and not value >= 0:
                raise ConfigError(
                    f"{flag(f.name)} must be >= 0 (or left out for no cap), got {value}"
                )


def flag(name: str) -> str:
    """The CLI flag of an :class:`OperatorLimits` field: ``--max-llm-calls-per-query``."""
    return "--max-" + name.replace("_", "-")


def _lower(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _field(setting: str) -> str:
    """The :class:`OperatorLimits` field capping a budget setting: ``max_llm_calls`` ->
    ``llm_calls_per_query``, ``max_cost_per_session`` -> ``cost_per_session``."""
    name = setting.removeprefix("max_")
    return name if name.endswith("_per_session") else name + "_per_query"


class Limiter:
    """The server's side: the per-query ceiling, each setting's default, the day's quota."""

    def __init__(
        self,
        limits: OperatorLimits,
        settings: Settings,
        *,
        today: Callable[[], object] = utc_today,
    ) -> None:
        self.limits = limits
        caps: dict[str, float | None] = {}
        origins: list[tuple[str, str]] = []
        self.defaults: dict[str, float | None] = {}
        for name in BUDGET_SETTINGS:
            field = _field(name)
            cap: float | None = getattr(limits, field)
            origin = f"duckdb-sem pgwire {flag(field)}"
            if cap is None:  # the process's own setting is the operator's
                cap, origin = getattr(settings, name), "DUCKDB_SEM_" + name.upper()
            caps[name] = cap
            origins.append((name, origin))
            self.defaults[name] = _lower(getattr(settings, name), cap)
        self.ceiling = Ceiling(origins=tuple(origins), **caps)  # type: ignore[arg-type]
        self.day = Quota(
            "this server today (UTC)",
            max_llm_calls=limits.llm_calls_per_day,
            max_prompt_tokens=limits.prompt_tokens_per_day,
            max_cost=limits.cost_per_day,
            origin="duckdb-sem pgwire --max-{what}-per-day",
            period=today,
        )

    def session_budget(self) -> Budget:
        """A new session's budget: the defaults, under the ceiling, drawing from a quota of
        its own and from the day's, and counting the client's own session caps."""
        session = Quota(
            "this session",
            max_llm_calls=self.limits.llm_calls_per_session,
            max_prompt_tokens=self.limits.prompt_tokens_per_session,
            max_cost=self.limits.cost_per_session,
            origin="duckdb-sem pgwire --max-{what}-per-session",
        )
        quotas = tuple(q for q in (session, self.day) if q.limited)
        d = self.defaults
        calls, tokens = d["max_llm_calls"], d["max_prompt_tokens"]
        own_calls, own_tokens = d["max_llm_calls_per_session"], d["max_prompt_tokens_per_session"]
        capped = self.ceiling.limited or any(
            getattr(self.ceiling, name) is not None for name in BUDGET_SETTINGS
        )
        return Budget(
            None if calls is None else int(calls),
            None if tokens is None else int(tokens),
            d["max_cost"],
            ceiling=self.ceiling if capped else None,
            quotas=quotas,
            session=session_quota(
                max_llm_calls=None if own_calls is None else int(own_calls),
                max_prompt_tokens=None if own_tokens is None else int(own_tokens),
                max_cost=d["max_cost_per_session"],
            ),
        )


class SessionLimits:
    """One session's budget; ``bind`` puts it on the session's connection (a new one too)."""

    def __init__(self, limiter: Limiter) -> None:
        self.limiter = limiter
        self.budget = limiter.session_budget()

    def bind(self, con: SemConnection) -> None:
        if con.budget is not self.budget:
            con.budget = self.budget

    def set(self, con: SemConnection, option: str, value: str | None) -> None:
        """``SET duckdb_sem.<option> = value`` (None: ``RESET``); a budget setting's
        ``DEFAULT`` and ``RESET`` go back to the server's default, never past its cap."""
        self.bind(con)
        if option.lower() in BUDGET_SETTINGS and (
            value is None or value.strip().strip("'").lower() == "default"
        ):
            default = self.limiter.defaults[option.lower()]
            value = "NULL" if default is None else str(default)
        con.set_option(option, value)
        self.budget = con.budget
