"""Budgets of LLM work: a query fails before it would exceed them, per query and per session.

``max_llm_calls`` bounds the requests the backend runs for one query, ``max_prompt_tokens``
their prompt tokens (estimated before each SEU with the one token estimate, counted after),
``max_cost`` the USD they cost at the models' prices (:mod:`.money`: checked against the SEU's
bound, counted from the tokens the backend reports; a model without a price costs $0).
Answers from the cache, from the query's own memo or fused with another query's cost nothing
and are not counted, so a rerun of a query whose answers are cached always fits. Before each
SEU the engine checks what the SEU would add that the cache does not hold; if that would pass
a budget, the query fails with :class:`~duckdb_sem.errors.BudgetExceededError` and the answers
it already has stay cached (raise the budget and rerun: they are not asked again).

Set per connection (``connect(max_llm_calls=...)``, ``con.budget``), per process
(``DUCKDB_SEM_MAX_LLM_CALLS``, ``DUCKDB_SEM_MAX_PROMPT_TOKENS``, ``DUCKDB_SEM_MAX_COST``) or per
session in SQL (``SET duckdb_sem.max_llm_calls = 100``, ``RESET duckdb_sem.max_llm_calls``).
The ``_per_session`` twins (``max_llm_calls_per_session``, ``max_prompt_tokens_per_session``,
``max_cost_per_session``) bound the sum over every query of one connection and its cursors
(:attr:`Budget.session`, a :class:`~.quota.Quota` they share); ``RESET`` of one starts its
count again, and a new connection starts at zero.

A wire server's operator caps them (:class:`Ceiling`): ``SET`` may lower a capped setting, never
raise it past the cap or lift it with ``NULL`` (22023), and every check counts against the cap
whatever the setting says. A budget also draws each SEU's calls, tokens and cost from its
shared quotas (:mod:`.quota`: a session's, a day's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from duckdb_sem.backends.tokens import estimate_tokens
from duckdb_sem.config import ENV_PREFIX, Settings
from duckdb_sem.errors import BudgetExceededError, ConfigError
from duckdb_sem.llm.request import LLMRequest
from duckdb_sem.optimizer.spend import Price, format_dollars
from duckdb_sem.runtime.money import batch_bound
from duckdb_sem.runtime.quota import Quota

__all__ = [
    "PER_QUERY",
    "PER_SESSION",
    "SETTINGS",
    "Budget",
    "Ceiling",
    "Drawn",
    "check_setting",
    "parse_setting",
    "session_quota",
]

#: the per-query budget settings (``SET duckdb_sem.<name> = N``)
PER_QUERY = ("max_llm_calls", "max_prompt_tokens", "max_cost")
#: the per-session ones: the sum over a connection's and its cursors' queries
PER_SESSION = ("max_llm_calls_per_session", "max_prompt_tokens_per_session",
               "max_cost_per_session")  # fmt: skip
#: every budget setting's SQL name
SETTINGS = (*PER_QUERY, *PER_SESSION)
_MONEY = ("max_cost", "max_cost_per_session")


def check_setting(name: str) -> None:
    """Raise unless ``name`` is one of the budget settings (``SET``/``SHOW duckdb_sem.name``)."""
    if name not in SETTINGS:
        raise ConfigError(
            f"unknown setting duckdb_sem.{name}; the settings are "
            + ", ".join(f"duckdb_sem.{s}" for s in SETTINGS)
        )


def parse_setting(name: str, value: str | None) -> float | None:
    """The number ``SET duckdb_sem.<name> = value`` asks for (None, ``''`` or NULL: no limit):
    a whole number, or an amount in USD for the ``max_cost`` settings."""
    check_setting(name)
    text = (value or "").strip().strip("'")
    if text.lower() in {"", "null", "none"}:
        return None
    if name in _MONEY:
        try:
            amount = float(text.removeprefix("$"))
        except ValueError:
            amount = float("nan")
        if not 0 <= amount < float("inf"):
            raise ConfigError(
                f"duckdb_sem.{name} takes an amount in USD >= 0 (e.g. 0.50) or NULL (no limit) "
                f"or DEFAULT, got {value!r}"
            )
        return amount
    try:
        return int(text)
    except ValueError:
        what = name.removeprefix("max_").removesuffix("_per_session")
        raise ConfigError(
            f"duckdb_sem.{name} takes a whole number of {what} or "
            f"NULL (no limit) or DEFAULT, got {value!r}"
        ) from None


def session_quota(
    *,
    max_llm_calls: int | None = None,
    max_prompt_tokens: int | None = None,
    max_cost: float | None = None,
) -> Quota:
    """A connection's own session count under its ``*_per_session`` settings."""
    return Quota(
        "this session (the connection and its cursors)",
        max_llm_calls=max_llm_calls,
        max_prompt_tokens=max_prompt_tokens,
        max_cost=max_cost,
        origin="duckdb_sem.max_{setting}_per_session",
        whose="its cap",
        advice=_session_advice,
    )


def _session_advice(what: str) -> str:
    """How to raise the session cap of ``what`` (``llm_calls``, ``prompt_tokens``, ``cost``)."""
    name = f"max_{what}_per_session"
    env = ENV_PREFIX + name.upper()
    return (
        f"Raise it (SET duckdb_sem.{name} = N, connect({name}=N) or {env}), or RESET "
        f"duckdb_sem.{name} to count again from zero (a new connection starts at zero too)."
    )


def _sentence(advice: str, rest: str) -> str:
    """The advice and the rest of a message's last sentence; without advice, the rest alone
    (its leading ``or`` dropped), capitalised."""
    if advice:
        return advice + rest
    rest = rest.removeprefix("or ")
    return rest[:1].upper() + rest[1:]


def _shown(name: str, number: float | None) -> str:
    if number is None:
        return "NULL (no limit)"
    return format_dollars(number) if name in _MONEY else str(number)


@dataclass(frozen=True, slots=True)
class Ceiling:
    """An operator's caps on the budget settings (None: no cap); ``origins`` says where each
    cap is set (setting name, e.g. ``duckdb-sem pgwire --max-llm-calls-per-query``), for
    messages. A ``_per_session`` cap only bounds what ``SET`` may ask: the operator's own
    session quota enforces it."""

    max_llm_calls: int | None = None
    max_prompt_tokens: int | None = None
    origins: tuple[tuple[str, str], ...] = ()
    max_cost: float | None = None
    max_llm_calls_per_session: int | None = None
    max_prompt_tokens_per_session: int | None = None
    max_cost_per_session: float | None = None

    @property
    def limited(self) -> bool:
        return any(getattr(self, name) is not None for name in PER_QUERY)

    def where(self, name: str) -> str:
        return dict(self.origins).get(name, "the operator")

    def admit(self, name: str, number: float | None) -> None:
        """Raise :class:`ConfigError` (22023) unless ``number`` is within the cap of ``name``."""
        cap = getattr(self, name)
        if cap is None or (number is not None and number <= cap):
            return
        per = "session" if name in PER_SESSION else "query"
        raise ConfigError(
            f'invalid value for parameter "duckdb_sem.{name}": {_shown(name, number)} is above '
            f"this server's cap of {_shown(name, cap)} per {per} (set by {self.where(name)}); "
            f"SET a number from 0 to {cap}, or RESET it to the cap"
        )


@dataclass(frozen=True, slots=True)
class Drawn:
    """What :meth:`Budget.check` took from the quotas for one SEU (its cost a bound)."""

    calls: int
    tokens: int
    cost: float


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits of one query's backend work (None: no limit), under an operator's ``ceiling``,
    drawing from shared ``quotas`` and from the connection's ``session`` count."""

    max_llm_calls: int | None = None
    max_prompt_tokens: int | None = None
    max_cost: float | None = None
    ceiling: Ceiling | None = field(default=None, compare=False)
    quotas: tuple[Quota, ...] = field(default=(), compare=False)
    #: the connection's own session count and caps (shared with its cursors); None: none
    session: Quota | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        for name in PER_QUERY:
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise ConfigError(f"{name} must be >= 0 (or unset for no limit), got {value}")

    @staticmethod
    def from_settings(settings: Settings) -> Budget:
        """A connection's budget: ``settings``' limits and a session count of its own."""
        return Budget(
            settings.max_llm_calls,
            settings.max_prompt_tokens,
            settings.max_cost,
            session=session_quota(
                max_llm_calls=settings.max_llm_calls_per_session,
                max_prompt_tokens=settings.max_prompt_tokens_per_session,
                max_cost=settings.max_cost_per_session,
            ),
        )

    @property
    def max_llm_calls_per_session(self) -> int | None:
        return None if self.session is None else self.session.max_llm_calls

    @property
    def max_prompt_tokens_per_session(self) -> int | None:
        return None if self.session is None else self.session.max_prompt_tokens

    @property
    def max_cost_per_session(self) -> float | None:
        return None if self.session is None else self.session.max_cost

    @property
    def limited(self) -> bool:
        capped = self.ceiling is not None and self.ceiling.limited
        return (
            any(getattr(self, name) is not None for name in PER_QUERY)
            or capped
            or any(q.limited for q in self._quotas())
        )

    def _quotas(self) -> tuple[Quota, ...]:
        return self.quotas if self.session is None else (*self.quotas, self.session)

    def _limit(self, name: str) -> tuple[float | None, str, str]:
        """The limit a check applies to ``name``; what its message notes about it (empty, or
        whose cap it is) and the advice that starts its last sentence."""
        own: float | None = getattr(self, name)
        cap = None if self.ceiling is None else getattr(self.ceiling, name)
        if self.ceiling is not None and cap is not None and (own is None or cap <= own):
            return cap, f"; this server's cap per query, set by {self.ceiling.where(name)}", ""
        if cap is not None:  # SET lowered it under the operator's cap
            return (
                own,
                "",
                f"Raise it up to this server's cap of {_shown(name, cap)} "
                f"(SET duckdb_sem.{name} = N), ",
            )
        env = ENV_PREFIX + name.upper()
        return own, "", f"Raise it (SET duckdb_sem.{name} = N, connect({name}=N) or {env}), "

    def check(
        self,
        *,
        query_id: str,
        calls_so_far: int,
        tokens_so_far: int,
        pending: Sequence[tuple[str, LLMRequest]],
        cached: Callable[[list[str]], set[str]],
        cost_so_far: float = 0.0,
        price: Price | None = None,
    ) -> Drawn | None:
        """Raise if running ``pending`` (signature, request) would pass a limit; ``cached``
        says which signatures the cache already answers, ``price`` what the model costs
        (None: $0). Passing, it draws the fresh requests from every quota (all or none) and
        returns what it drew (None: nothing fresh)."""
        hits = cached([sig for sig, _ in pending])
        fresh = [r for sig, r in pending if sig not in hits]
        if not fresh:
            return None
        calls = calls_so_far + len(fresh)
        limit, note, advice = self._limit("max_llm_calls")
        if limit is not None and calls > limit:
            rest = _sentence(
                advice, "add a LIMIT or a filter, or check the cost first with EXPLAIN SEMANTIC"
            )
            raise BudgetExceededError(
                f"query {query_id} would make more than max_llm_calls={limit} LLM calls "
                f"({calls_so_far} made, {len(fresh)} more in the next batch{note}); the answers "
                f"so far are cached. {rest}"
            )
        batch = sum(estimate_tokens(r.prefix) + estimate_tokens(r.row) for r in fresh)
        tokens = tokens_so_far + batch
        limit, note, advice = self._limit("max_prompt_tokens")
        if limit is not None and tokens > limit:
            rest = _sentence(advice, "or check the cost first with EXPLAIN SEMANTIC")
            raise BudgetExceededError(
                f"query {query_id} would send more than max_prompt_tokens={limit} prompt tokens "
                f"(about {tokens:,} with the next batch; {tokens_so_far:,} sent{note}); the "
                f"answers so far are cached. {rest}"
            )
        bound = batch_bound(fresh, price)
        limit, note, advice = self._limit("max_cost")
        if limit is not None and bound > 0 and cost_so_far + bound > limit:
            rest = _sentence(advice, "add a LIMIT or a filter, or check the cost first with "
                                     "EXPLAIN SEMANTIC")  # fmt: skip
            raise BudgetExceededError(
                f"query {query_id} would spend more than max_cost={format_dollars(limit)} "
                f"({format_dollars(cost_so_far)} spent, up to {format_dollars(bound)} more in "
                f"the next batch of {len(fresh)} requests{note}); the answers so far are "
                f"cached. {rest}"
            )
        drawn: list[Quota] = []
        try:
            for quota in self._quotas():
                quota.draw(calls=len(fresh), tokens=batch, cost=bound)
                drawn.append(quota)
        except BudgetExceededError:
            for quota in drawn:
                quota.refund(calls=len(fresh), tokens=batch, cost=bound)
            raise
        return Drawn(len(fresh), batch, bound)

    def settle(self, drawn: Drawn | None, *, calls: int, tokens: int, cost: float) -> None:
        """After an SEU: the quotas keep what it spent in place of the bound drawn for it
        (``drawn`` None: nothing was drawn, and the session counts what the backend ran)."""
        if drawn is None:
            if self.session is not None and (calls or tokens or cost):
                self.session.add(calls=calls, tokens=tokens, cost=cost)
            return
        for quota in self._quotas():
            quota.settle(cost=cost - drawn.cost)

    def with_setting(self, name: str, value: str | None) -> Budget:
        """This budget with SQL setting ``name`` set to ``value`` (None or NULL: no limit);
        a value above the ceiling's cap is refused (22023)."""
        number = parse_setting(name, value)
        if self.ceiling is not None:
            self.ceiling.admit(name, number)
        if name in PER_SESSION:
            what = name.removesuffix("_per_session")
            session = self.session if self.session is not None else session_quota()
            return replace(self, session=session.capped(**{what: number}))
        if name == "max_cost":
            return replace(self, max_cost=number)
        whole = None if number is None else int(number)
        if name == "max_llm_calls":
            return replace(self, max_llm_calls=whole)
        return replace(self, max_prompt_tokens=whole)
