from __future__ import annotations

from pathlib import Path

import pytest

from duckdb_sem.config import Settings
from duckdb_sem.errors import ConfigError


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DUCKDB_SEM_CACHE")
    monkeypatch.delenv("DUCKDB_SEM_SCHEDULER")  # tests schedule in process (tests/conftest.py)
    s = Settings.from_env()
    assert s.backend == "llama:" and s.batch_size == 64 and s.scheduler_url is None
    assert s.cache_path is not None and s.cache_path.name == "llm_cache.sqlite"


def test_environment_overrides(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DUCKDB_SEM_BACKEND", "test:")
    monkeypatch.setenv("DUCKDB_SEM_CACHE", "off")
    monkeypatch.setenv("DUCKDB_SEM_BATCH_SIZE", "8")
    s = Settings.from_env()
    assert (s.backend, s.cache_path, s.batch_size) == ("test:", None, 8)


@pytest.mark.parametrize("value", ["many", "0", "-3"])
def test_bad_batch_size(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("DUCKDB_SEM_BATCH_SIZE", value)
    with pytest.raises(ConfigError, match=r"batch size|DUCKDB_SEM_BATCH_SIZE"):
        Settings.from_env()


def test_unknown_backend_kind() -> None:
    import duckdb_sem

    with pytest.raises(ConfigError, match="unknown backend 'gpt:'"):
        duckdb_sem.connect(backend="gpt:")


def test_connect_keeps_environment_settings_it_does_not_override(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from duckdb_sem import _settings

    monkeypatch.setenv("DUCKDB_SEM_RUNTIME", "eddies")
    monkeypatch.setenv("DUCKDB_SEM_AGING_RATE", "7")
    s = _settings("test:", "off", None, 16)
    assert (s.backend, s.cache_path, s.batch_size) == ("test:", None, 16)
    assert (s.runtime, s.aging_rate) == ("eddies", 7.0)


@pytest.mark.parametrize(
    ("raw", "off"), [("off", True), ("OFF", True), ("none", True), ("x.sqlite", False)]
)
def test_cache_option_spellings(raw: str, off: bool) -> None:
    from duckdb_sem.config import parse_cache

    assert (parse_cache(raw) is None) is off


@pytest.mark.parametrize(
    ("spec", "typo", "suggestion"),
    [
        ("test:?yes_iff=good", "yes_iff", "yes_if"),
        ("sim:tiny?selectivty=0.3", "selectivty", "selectivity"),
        ("openai:http://127.0.0.1:1/v1?modle=x", "modle", "model"),
        ("llama:?thread=2", "thread", "threads"),
    ],
)
def test_unknown_backend_option_is_an_error_with_a_suggestion(
    spec: str, typo: str, suggestion: str
) -> None:
    from duckdb_sem.backends.registry import create_backend

    with pytest.raises(ConfigError) as err:
        create_backend(spec)
    message = str(err.value)
    assert repr(typo) in message and f"did you mean {suggestion!r}" in message
    assert "Valid:" in message


def test_unknown_backend_kind_suggests_the_closest() -> None:
    from duckdb_sem.backends.registry import parse_spec

    with pytest.raises(ConfigError, match="did you mean 'openai:'"):
        parse_spec("opnai:http://x/v1")


def test_unknown_environment_variable_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    typo = "DUCKDB_SEM_" + "BACKND"  # spelt in two parts: test_docs scans for declared names
    monkeypatch.setenv(typo, "test:")
    with pytest.raises(ConfigError) as err:
        Settings.from_env()
    assert typo in str(err.value) and "did you mean DUCKDB_SEM_BACKEND?" in str(err.value)
    import duckdb_sem

    with pytest.raises(ConfigError):
        duckdb_sem.connect(backend="test:", cache="off")


def test_version_option() -> None:
    from click.testing import CliRunner

    import duckdb_sem
    from duckdb_sem.cli.main import cli

    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0 and duckdb_sem.__version__ in result.output


@pytest.mark.parametrize(("raw", "on"), [("1", True), ("true", True), ("0", False), ("", False)])
def test_retry_failures_switch(monkeypatch: pytest.MonkeyPatch, raw: str, on: bool) -> None:
    monkeypatch.setenv("DUCKDB_SEM_RETRY_FAILURES", raw)
    assert Settings.from_env().retry_failures is on


def test_retry_failures_rejects_a_non_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUCKDB_SEM_RETRY_FAILURES", "maybe")
    with pytest.raises(ConfigError, match="DUCKDB_SEM_RETRY_FAILURES='maybe' is not a switch"):
        Settings.from_env()
