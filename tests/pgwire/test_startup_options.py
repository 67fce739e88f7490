"""Startup settings read as PostgreSQL reads them (``pg_split_opts``, ``-c``, ``--name=value``).

In process, no server: the wire tests (``test_operator_limits.py``, ``test_timezone.py``)
connect with these options to PostgreSQL 15 and to the server and compare.
"""

from __future__ import annotations

import pytest

from duckdb_sem.config import Settings
from duckdb_sem.pgwire.limits import Limiter, OperatorLimits
from duckdb_sem.pgwire.startup import (
    SettingNameError,
    check_setting_name,
    split_options,
    startup_settings,
)


def test_options_split_on_spaces_and_a_backslash_keeps_the_next_character() -> None:
    assert split_options(r"-c  search_path=a,\ b   -cx=1 \\") == [
        "-c",
        "search_path=a, b",
        "-cx=1",
        "\\",
    ]
    assert split_options("") == []


def test_options_first_then_the_other_parameters() -> None:
    params = {
        "user": "u",
        "database": "d",
        "options": "-c TimeZone=Asia/Tokyo --statement-timeout=5 -capplication_name=x",
        "application_name": "psql",
        "_pq_.something": "1",
    }
    assert startup_settings(params) == [
        ("timezone", "Asia/Tokyo"),
        ("statement_timeout", "5"),
        ("application_name", "x"),
        ("application_name", "psql"),  # applied last: wins, as in PostgreSQL
    ]


@pytest.mark.parametrize(
    ("options", "sqlstate", "message"),
    [
        ("-c foo", "42601", "-c foo requires a value"),
        ("-c", "42601", "invalid command-line argument for server process: -c"),
        ("-B 10", "42601", "invalid command-line argument for server process: -B"),
    ],
)
def test_malformed_options(options: str, sqlstate: str, message: str) -> None:
    with pytest.raises(SettingNameError, match=message) as caught:
        startup_settings({"options": options})
    assert caught.value.sqlstate == sqlstate


@pytest.mark.parametrize(
    ("name", "sqlstate"),
    [
        ("dsem_nope", "42704"),
        ("shared_buffers", "55P02"),
        ("server_version", "55P02"),
        ("wal_sender_timeout", None),
        ("log_statement", "42501"),
        ("timezone", None),
        ("myext.anything", None),
    ],
)
def test_names_are_judged_as_postgresql_15_judges_them(name: str, sqlstate: str | None) -> None:
    if sqlstate is None:
        check_setting_name(name)
        return
    with pytest.raises(SettingNameError) as caught:
        check_setting_name(name)
    assert caught.value.sqlstate == sqlstate


def test_the_process_budget_is_the_cap_when_no_flag_is_given() -> None:
    settings = Settings(max_llm_calls=300, max_prompt_tokens=None)
    limiter = Limiter(OperatorLimits(), settings)
    assert limiter.ceiling.max_llm_calls == 300 and limiter.ceiling.max_prompt_tokens is None
    assert "DUCKDB_SEM_MAX_LLM_CALLS" in limiter.ceiling.where("max_llm_calls")
    flagged = Limiter(OperatorLimits(llm_calls_per_query=500), settings)
    assert flagged.ceiling.max_llm_calls == 500 and flagged.defaults["max_llm_calls"] == 300
    budget = flagged.session_budget()
    assert budget.max_llm_calls == 300
    assert budget.with_setting("max_llm_calls", "500").max_llm_calls == 500
    assert Limiter(OperatorLimits(), Settings()).session_budget().ceiling is None
