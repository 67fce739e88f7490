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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from duckdb_sem.backends.tokens import estimate_tokens
from duckdb_sem.errors import BudgetExceededError, ConfigError
from duckdb_sem.llm.request import LLMRequest

__all__ = ["SETTINGS", "Budget", "check_setting"]

#: the SQL names of the budget settings (``SET duckdb_sem.<name> = N``)
SETTINGS = ("max_llm_calls", "max_prompt_tokens")


def check_setting(name: str) -> None:
    """Raise unless ``name`` is one of the budget settings (``SET``/``SHOW duckdb_sem.name``)."""
    if name not in SETTINGS:
        raise ConfigError(
            f"unknown setting duckdb_sem.{name}; the settings are "
            + ", ".join(f"duckdb_sem.{s}" for s in SETTINGS)
        )


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits of one query's backend work (None: no limit)."""

    max_llm_calls: int | None = None
    max_prompt_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in SETTINGS:
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigError(f"{name} must be >= 0 (or unset for no limit), got {value}")

    @property
    def limited(self) -> bool:
        return self.max_llm_calls is not None or self.max_prompt_tokens is not None

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
        says which signatures the cache already answers."""
        hits = cached([sig for sig, _ in pending])
        fresh = [r for sig, r in pending if sig not in hits]
        if not fresh:
            return
        calls = calls_so_far + len(fresh)
        if self.max_llm_calls is not None and calls > self.max_llm_calls:
            raise BudgetExceededError(
                f"query {query_id} would make more than max_llm_calls={self.max_llm_calls} "
                f"LLM calls ({calls_so_far} made, {len(fresh)} more in the next batch); the "
                "answers so far are cached. Raise it (SET duckdb_sem.max_llm_calls = N, "
                "connect(max_llm_calls=N) or DUCKDB_SEM_MAX_LLM_CALLS), add a LIMIT or a "
                "filter, or check the cost first with EXPLAIN SEMANTIC"
            )
        tokens = tokens_so_far + sum(
            estimate_tokens(r.prefix) + estimate_tokens(r.row) for r in fresh
        )
        if self.max_prompt_tokens is not None and tokens > self.max_prompt_tokens:
            raise BudgetExceededError(
                f"query {query_id} would send more than max_prompt_tokens="
                f"{self.max_prompt_tokens} prompt tokens (about {tokens:,} with the next batch; "
                f"{tokens_so_far:,} sent); the answers so far are cached. Raise it (SET "
                "duckdb_sem.max_prompt_tokens = N, connect(max_prompt_tokens=N) or "
                "DUCKDB_SEM_MAX_PROMPT_TOKENS), or check the cost first with EXPLAIN SEMANTIC"
            )

    def with_setting(self, name: str, value: str | None) -> Budget:
        """This budget with SQL setting ``name`` set to ``value`` (None or NULL: no limit)."""
        check_setting(name)
        text = (value or "").strip().strip("'")
        if text.lower() in {"", "null", "none"}:
            number = None
        else:
            try:
                number = int(text)
            except ValueError:
                raise ConfigError(
                    f"duckdb_sem.{name} takes a whole number of {name.removeprefix('max_')} or "
                    f"NULL (no limit) or DEFAULT, got {value!r}"
                ) from None
        if name == "max_llm_calls":
            return Budget(number, self.max_prompt_tokens)
        return Budget(self.max_llm_calls, number)
