"""All configuration in one place: every environment variable is declared here, once.

==============================  ==========================  ==========================================
variable                        default                     meaning
==============================  ==========================  ==========================================
``DUCKDB_SEM_BACKEND``          ``llama:``                  backend spec (see docs/backends.md)
``DUCKDB_SEM_CACHE``            ``~/.cache/duckdb-sem/      LLM-call cache file; ``off`` disables it
                                llm_cache.sqlite``
``DUCKDB_SEM_SCHEDULER``        (in process)                sidecar URL, e.g. ``http://127.0.0.1:7300``
``DUCKDB_SEM_BATCH_SIZE``       ``64``                      rows per SEU (one batch of LLM work)
``DUCKDB_SEM_POLICY``           ``srtf``                    in-process scheduling policy
==============================  ==========================  ==========================================

Options passed to :func:`duckdb_sem.connect` override the environment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from duckdb_sem.errors import ConfigError

__all__ = ["ENV_VARS", "Settings", "default_cache_path"]

ENV_VARS = {
    "DUCKDB_SEM_BACKEND": "backend spec (default llama:)",
    "DUCKDB_SEM_CACHE": "LLM-call cache file, or 'off'",
    "DUCKDB_SEM_SCHEDULER": "sidecar scheduler URL (default: in process)",
    "DUCKDB_SEM_BATCH_SIZE": "rows per SEU (default 64)",
    "DUCKDB_SEM_POLICY": "in-process scheduling policy (default srtf)",
}


def default_cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "duckdb-sem" / "llm_cache.sqlite"


@dataclass(frozen=True, slots=True)
class Settings:
    backend: str = "llama:"
    cache_path: Path | None = None  # None: no persistent cache
    scheduler_url: str | None = None
    batch_size: int = 64
    policy: str = "srtf"

    @staticmethod
    def from_env() -> Settings:
        env = os.environ
        cache_raw = env.get("DUCKDB_SEM_CACHE", "")
        cache: Path | None
        if cache_raw.lower() in {"off", "none", "0", "false"}:
            cache = None
        else:
            cache = Path(cache_raw).expanduser() if cache_raw else default_cache_path()
        batch_raw = env.get("DUCKDB_SEM_BATCH_SIZE", "64")
        try:
            batch = int(batch_raw)
        except ValueError:
            raise ConfigError(
                f"DUCKDB_SEM_BATCH_SIZE={batch_raw!r} is not an integer; set it to e.g. 64"
            ) from None
        settings = Settings(
            backend=env.get("DUCKDB_SEM_BACKEND", "llama:") or "llama:",
            cache_path=cache,
            scheduler_url=env.get("DUCKDB_SEM_SCHEDULER") or None,
            batch_size=batch,
            policy=env.get("DUCKDB_SEM_POLICY", "srtf") or "srtf",
        )
        settings.validate()
        return settings

    def with_overrides(self, **changes: object) -> Settings:
        updated = replace(self, **{k: v for k, v in changes.items() if v is not None})  # type: ignore[arg-type]
        updated.validate()
        return updated

    def validate(self) -> None:
        if self.batch_size < 1:
            raise ConfigError(f"batch size must be at least 1, got {self.batch_size}")
