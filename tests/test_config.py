from __future__ import annotations

from pathlib import Path

import pytest

from duckdb_sem.config import Settings
from duckdb_sem.errors import ConfigError


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DUCKDB_SEM_CACHE")
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
