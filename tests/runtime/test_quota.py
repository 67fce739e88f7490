"""Operator caps in the runtime: a ceiling on the per-query settings, quotas shared by queries.

Deterministic and in process: requests are fabricated, the day of a daily quota is an injected
clock, and nothing is sent to a backend (``Budget.check`` runs before each SEU).
"""

from __future__ import annotations

import datetime as dt

import pytest

from duckdb_sem.errors import BudgetExceededError, ConfigError
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import LLMRequest, OperatorKind
from duckdb_sem.runtime.budget import Budget, Ceiling
from duckdb_sem.runtime.quota import Quota

FLAG = (("max_llm_calls", "pgwire --max-llm-calls-per-query"),)


def _items(n: int, start: int = 0) -> list[tuple[str, LLMRequest]]:
    requests = [build_request(OperatorKind.FILTER, f"row {i}") for i in range(start, start + n)]
    return [(r.signature("t"), r) for r in requests]


def _check(budget: Budget, n: int, *, made: int = 0, hits: set[str] | None = None) -> None:
    budget.check(
        query_id="q1",
        calls_so_far=made,
        tokens_so_far=0,
        pending=_items(n),
        cached=lambda sigs: hits or set(),
    )


def test_a_ceiling_lets_set_lower_and_refuses_higher_or_null() -> None:
    budget = Budget(300, None, ceiling=Ceiling(300, None, FLAG))
    assert budget.with_setting("max_llm_calls", "5").max_llm_calls == 5
    assert budget.with_setting("max_llm_calls", "300").max_llm_calls == 300
    for escape in ("301", "NULL", None, ""):
        with pytest.raises(ConfigError, match="--max-llm-calls-per-query") as caught:
            budget.with_setting("max_llm_calls", escape)
        assert caught.value.sqlstate == "22023"
    # uncapped settings stay free: prompt tokens may be lifted
    assert budget.with_setting("max_prompt_tokens", "NULL").max_prompt_tokens is None
    lowered = budget.with_setting("max_llm_calls", "5")
    assert lowered.ceiling is budget.ceiling  # a SET keeps the operator's caps


def test_the_ceiling_holds_even_when_the_setting_says_more() -> None:
    budget = Budget(None, None, ceiling=Ceiling(10, None, FLAG))  # however it got there
    _check(budget, 10)
    with pytest.raises(BudgetExceededError, match=r"max_llm_calls=10 .*--max-llm-calls-per-query"):
        _check(budget, 4, made=8)


def test_a_quota_counts_across_queries_and_cache_hits_are_free() -> None:
    session = Quota("this session", max_llm_calls=25, origin="--max-{what}-per-session")
    budget = Budget(quotas=(session,))
    assert budget.limited
    _check(budget, 10)
    _check(budget, 10)
    with pytest.raises(BudgetExceededError, match=r"20 of its 25 .*--max-llm-calls-per-session"):
        _check(budget, 10)
    assert session.used()[0] == 20  # a refused draw takes nothing
    _check(budget, 10, hits={sig for sig, _ in _items(10)})  # all cached: nothing drawn
    _check(budget, 5)
    assert session.used()[0] == 25


def test_a_draw_is_all_or_nothing_across_quotas() -> None:
    day = Quota("today", max_llm_calls=100)
    session = Quota("this session", max_llm_calls=5)
    budget = Budget(quotas=(day, session))
    with pytest.raises(BudgetExceededError, match="this session"):
        _check(budget, 6)
    assert day.used() == (0, 0)  # the day's draw was given back


def test_prompt_tokens_are_drawn_too() -> None:
    quota = Quota("this session", max_prompt_tokens=50, origin="--max-{what}-per-session")
    budget = Budget(quotas=(quota,))
    with pytest.raises(
        BudgetExceededError, match=r"prompt tokens .*--max-prompt-tokens-per-session"
    ):
        _check(budget, 100)
    assert quota.used() == (0, 0)


def test_a_daily_quota_starts_again_the_next_day() -> None:
    today = [dt.date(2026, 12, 2)]
    day = Quota("this server today (UTC)", max_llm_calls=3, period=lambda: today[0])
    day.draw(calls=3, tokens=10)
    with pytest.raises(BudgetExceededError, match="midnight UTC"):
        day.draw(calls=1, tokens=1)
    today[0] = dt.date(2026, 12, 3)
    day.draw(calls=3, tokens=10)
    assert day.used() == (3, 10)


def test_negative_caps_are_refused() -> None:
    with pytest.raises(ConfigError, match=">= 0"):
        Quota("this session", max_llm_calls=-1)
