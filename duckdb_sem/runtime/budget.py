"""Per-query budgets of LLM work: a query fails before it would exceed them.

``max_llm_calls`` bounds the requests the backend runs for one query, ``max_prompt_tokens``
their prompt tokens (estimated before each SEU with the one token estimate, counted after).
Answers from the cache, from the query's own memo or fused with another query's cost nothing
and are not counted, so a rerun of a query whose answers are cached always fits. Before each
SEU the engine checks what the SEU would add that the cache does not hold; if that would pass
a budget, the query fails with :class:`~duckdb_sem.errors.BudgetExceededError` and the answers
it already has stay cached (raise the budget and rerun: they are not asked again).

Set per connection (``connect(max_llm_calls=...)``, ``con.budget``), per process
(``DUCKDB_SEM_MAX_LLM_CALLS``, ``DUCKDB_SEM_MAX_PROMPT_TOKENS``) or per session in SQL
(``SET duckdb_sem.max_llm_calls = 100``, ``RESET duckdb_sem.max_llm_calls``).

A wire server's operator caps them (:class:`Ceiling`): ``SET`` may lower a capped setting, never
raise it past the cap or lift it with ``NULL`` (22023), and every check counts against the cap
whatever the setting says. A budget also draws each SEU's calls and tokens from its shared
quotas (:mod:`.quota`: a session's, a day's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from duckdb_sem.backends.tokens import estimate_tokens
from duckdb_sem.errors import BudgetExceededError, ConfigError
from duckdb_sem.llm.request import LLMRequest
from duckdb_sem.runtime.quota import Quota

__all__ = ["SETTINGS", "Budget", "Ceiling", "check_setting", "parse_setting"]

#: the SQL names of the budget settings (``SET duckdb_sem.<name> = N``)
SETTINGS = ("max_llm_calls", "max_prompt_tokens")


def check_setting(name: str) -> None:
    """Raise unless ``name`` is one of the budget settings (``SET``/``SHOW duckdb_sem.name``)."""
    if name not in SETTINGS:
        raise ConfigError(
            f"unknown setting duckdb_sem.{name}; the settings are "
            + ", ".join(f"duckdb_sem.{s}" for s in SETTINGS)
        )


def parse_setting(name: str, value: str | None) -> int | None:
    """The number ``SET duckdb_sem.<name> = value`` asks for (None, ``''`` or NULL: no limit)."""
    check_setting(name)
    text = (value or "").strip().strip("'")
    if text.lower() in {"", "null", "none"}:
        return None
    try:
        return int(text)
    except ValueError:
        raise ConfigError(
            f"duckdb_sem.{name} takes a whole number of {name.removeprefix('max_')} or "
            f"NULL (no limit) or DEFAULT, got {value!r}"
        ) from None


def _sentence(advice: str, rest: str) -> str:
    """The advice and the rest of a message's last sentence; without advice, the rest alone
    (its leading ``or`` dropped), capitalised."""
    if advice:
        return advice + rest
    rest = rest.removeprefix("or ")
    return rest[:1].upper() + rest[1:]


@dataclass(frozen=True, slots=True)
class Ceiling:
    """An operator's caps on the per-query settings (None: no cap); ``origins`` says where each
    cap is set (setting name, e.g. ``duckdb-sem pgwire --max-llm-calls-per-query``), for
    messages."""

    max_llm_calls: int | None = None
    max_prompt_tokens: int | None = None
    origins: tuple[tuple[str, str], ...] = ()

    @property
    def limited(self) -> bool:
        return self.max_llm_calls is not None or self.max_prompt_tokens is not None

    def where(self, name: str) -> str:
        return dict(self.origins).get(name, "the operator")

    def admit(self, name: str, number: int | None) -> None:
        """Raise :class:`ConfigError` (22023) unless ``number`` is within the cap of ``name``."""
        cap = getattr(self, name)
        if cap is None or (number is not None and number <= cap):
            return
        asked = "NULL (no limit)" if number is None else str(number)
        raise ConfigError(
            f'invalid value for parameter "duckdb_sem.{name}": {asked} is above this server\'s '
            f"cap of {cap} per query (set by {self.where(name)}); SET a number from 0 to {cap}, "
            "or RESET it to the cap"
        )


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits of one query's backend work (None: no limit), under an operator's ``ceiling``
    and drawing from shared ``quotas``."""

    max_llm_calls: int | None = None
    max_prompt_tokens: int | None = None
    ceiling: Ceiling | None = field(default=None, compare=False)
    quotas: tuple[Quota, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        for name in SETTINGS:
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigError(f"{name} must be >= 0 (or unset for no limit), got {value}")

    @property
    def limited(self) -> bool:
        capped = self.ceiling is not None and self.ceiling.limited
        return (
            self.max_llm_calls is not None
            or self.max_prompt_tokens is not None
            or capped
            or any(q.limited for q in self.quotas)
        )

    def _limit(self, name: str) -> tuple[int | None, str, str]:
        """The limit a check applies to ``name``; what its message notes about it (empty, or
        whose cap it is) and the advice that starts its last sentence."""
        own: int | None = getattr(self, name)
        cap = None if self.ceiling is None else getattr(self.ceiling, name)
        if self.ceiling is not None and cap is not None and (own is None or cap <= own):
            return cap, f"; this server's cap per query, set by {self.ceiling.where(name)}", ""
        if cap is not None:  # SET lowered it under the operator's cap
            return (
                own,
                "",
                f"Raise it up to this server's cap of {cap} (SET duckdb_sem.{name} = N), ",
            )
        env = "DUCKDB_SEM_" + name.upper()
        return own, "", f"Raise it (SET duckdb_sem.{name} = N, connect({name}=N) or {env}), "

    def check(
        self,
        *,
        query_id: str,
        calls_so_far: int,
        tokens_so_far: int,
        pending: Sequence[tuple[str, LLMRequest]],
        cached: Callable[[list[str]], set[str]],
    ) -> None:
        """Raise if running ``pending`` (signature, request) would pass a limit; ``cached``
        says which signatures the cache already answers. Passing, it draws the fresh requests
        from every quota (all or none)."""
        hits = cached([sig for sig, _ in pending])
        fresh = [r for sig, r in pending if sig not in hits]
        if not fresh:
            return
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
        drawn: list[Quota] = []
        try:
            for quota in self.quotas:
                quota.draw(calls=len(fresh), tokens=batch)
                drawn.append(quota)
        except BudgetExceededError:
            for quota in drawn:
                quota.refund(calls=len(fresh), tokens=batch)
            raise

    def with_setting(self, name: str, value: str | None) -> Budget:
        """This budget with SQL setting ``name`` set to ``value`` (None or NULL: no limit);
        a value above the ceiling's cap is refused (22023)."""
        number = parse_setting(name, value)
        if self.ceiling is not None:
            self.ceiling.admit(name, number)
        if name == "max_llm_calls":
            return replace(self, max_llm_calls=number)
        return replace(self, max_prompt_tokens=number)
