"""All configuration in one place: every environment variable is declared here, once.

==============================  ==========================  ==========================================
variable                        default                     meaning
==============================  ==========================  ==========================================
``DUCKDB_SEM_BACKEND``          ``llama:``                  backend spec (see docs/backends.md)
``DUCKDB_SEM_CACHE``            ``~/.cache/duckdb-sem/      LLM-call cache file; ``off`` disables it
                                llm_cache.sqlite``
``DUCKDB_SEM_SCHEDULER``        (``local`` for ``llama:``,  ``local`` (one sidecar per user and backend),
                                in process otherwise)       ``inprocess``, or a sidecar URL, e.g.
                                                            ``http://127.0.0.1:7300``
``DUCKDB_SEM_SCHEDULER_IDLE``   ``300``                     seconds a ``local`` sidecar waits idle
                                                            before it exits
``DUCKDB_SEM_SCHEDULER_TOKEN``  (none; ``serve``: made)     token a sidecar client sends when its URL
                                                            has none; ``duckdb-sem serve --token``
``DUCKDB_SEM_SCHEDULER_OPERATOR_TOKEN``  (made by serve)    ``serve --operator-token``: sees and
                                                            cancels every client's queries
``DUCKDB_SEM_BATCH_SIZE``       ``64``                      rows per SEU (one batch of LLM work)
``DUCKDB_SEM_POLICY``           ``srtf``                    in-process scheduling policy
``DUCKDB_SEM_RUNTIME``          ``adaptive``                planned queries: adaptive, static, static-best,
                                                            eddies, lotus-like
``DUCKDB_SEM_SEU_ROWS``         ``256``                     driving-table rows per plan-level SEU (adapts)
``DUCKDB_SEM_ESTIMATOR_BACKEND``  (off)                     small model that samples each batch, a spec
``DUCKDB_SEM_ESTIMATOR_SAMPLE``   ``8``                     rows per operator it samples per batch
``DUCKDB_SEM_AGING_RATE``       ``100``                     srtf/joint aging: cost units per second waited
``DUCKDB_SEM_MAX_LLM_CALLS``    (no limit)                  per query: most backend calls before it fails
``DUCKDB_SEM_MAX_PROMPT_TOKENS``  (no limit)                per query: most prompt tokens before it fails
``DUCKDB_SEM_MAX_COST``         (no limit)                  per query: most USD spent before it fails
``DUCKDB_SEM_MAX_LLM_CALLS_PER_SESSION``  (no limit)        per connection and its cursors: most calls
``DUCKDB_SEM_MAX_PROMPT_TOKENS_PER_SESSION``  (no limit)    per connection: most prompt tokens
``DUCKDB_SEM_MAX_COST_PER_SESSION``  (no limit)             per connection: most USD spent
``DUCKDB_SEM_PRICE_IN``         (none)                      USD per million prompt tokens (EXPLAIN money)
``DUCKDB_SEM_PRICE_OUT``        (none)                      USD per million completion tokens
``DUCKDB_SEM_MODELS``           (none)                      named models, ``name=spec;name=spec``
                                                            (``model := 'name'``; docs/backends.md)
``DUCKDB_SEM_EMBED_BACKEND``    ``minilm:``                 embedding model spec (sem_sim_join, blocking)
``DUCKDB_SEM_APPROXIMATE``      ``off``                     allow approximate (lossy) plans: blocking
``DUCKDB_SEM_JOIN_RECALL``      ``0.95``                    recall target of a blocked sem_join
``DUCKDB_SEM_FILTER_PRECISION`` ``0.9``                     precision target of a cascaded sem_filter
``DUCKDB_SEM_FILTER_RECALL``    ``0.9``                     recall target of a cascaded sem_filter
``DUCKDB_SEM_FILTER_HELPER``    ``auto``                    cascade helper: auto, estimator, embed, a spec
``DUCKDB_SEM_CONFIDENCE``       ``0.9``                     how often approximate plans' targets must hold
``DUCKDB_SEM_RETRY_FAILURES``   ``0``                       ``1``: ask again for answers cached as failed
                                                            (unparsable, NULL) instead of reusing them
==============================  ==========================  ==========================================

Options passed to :func:`duckdb_sem.connect` override the environment. A ``DUCKDB_SEM_*``
variable that is not declared in :data:`ENV_VARS` is an error (:func:`check_env`), with the
closest declared name as a suggestion: a misspelt ``DUCKDB_SEM_BACKEND`` must not silently
mean the default.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from duckdb_sem.errors import ConfigError

__all__ = [
    "ENV_PREFIX",
    "ENV_VARS",
    "INPROCESS_SCHEDULER",
    "LOCAL_SCHEDULER",
    "Settings",
    "check_env",
    "default_cache_path",
    "parse_bool",
    "parse_cache",
    "parse_models",
    "scheduler_token",
]

ENV_PREFIX = "DUCKDB_SEM_"

#: the ``DUCKDB_SEM_SCHEDULER`` value (``scheduler=`` option) that asks for the per-user local
#: sidecar of the backend (``scheduler/local.py``); unset, an embedded backend (``llama:``) gets it
LOCAL_SCHEDULER = "local"
#: the value that keeps scheduling in this process, whatever the backend
INPROCESS_SCHEDULER = "inprocess"
_SIDECAR_SCHEMES = ("http://", "https://", "unix://")

ENV_VARS = {
    "DUCKDB_SEM_BACKEND": "backend spec (default llama:)",
    "DUCKDB_SEM_CACHE": "LLM-call cache file, or 'off'",
    "DUCKDB_SEM_SCHEDULER": "local, inprocess, or a sidecar scheduler URL (default: local for "
    "llama:, in process otherwise)",
    "DUCKDB_SEM_SCHEDULER_IDLE": "seconds a local sidecar waits idle before it exits (default 300)",
    "DUCKDB_SEM_SCHEDULER_TOKEN": "token a sidecar client sends when DUCKDB_SEM_SCHEDULER's URL "
    "has none; duckdb-sem serve: the client token it requires (default: generated)",
    "DUCKDB_SEM_SCHEDULER_OPERATOR_TOKEN": "duckdb-sem serve: the operator token, which sees and "
    "cancels every client's queries (default: generated)",
    "DUCKDB_SEM_BATCH_SIZE": "rows per SEU (default 64)",
    "DUCKDB_SEM_POLICY": "in-process scheduling policy (default srtf)",
    "DUCKDB_SEM_RUNTIME": "runtime of planned queries (default adaptive)",
    "DUCKDB_SEM_SEU_ROWS": "driving-table rows per plan-level SEU (default 256)",
    "DUCKDB_SEM_ESTIMATOR_BACKEND": "backend spec of the estimator's small model (default off)",
    "DUCKDB_SEM_ESTIMATOR_SAMPLE": "rows per operator the estimator samples per batch (default 8)",
    "DUCKDB_SEM_AGING_RATE": "srtf/joint aging rate, cost units per second waited (default 100)",
    "DUCKDB_SEM_MAX_LLM_CALLS": "per query: most backend LLM calls before it fails (default none)",
    "DUCKDB_SEM_MAX_PROMPT_TOKENS": "per query: most prompt tokens sent before it fails (default none)",
    "DUCKDB_SEM_MAX_COST": "per query: most USD spent on backends before it fails (default none)",
    "DUCKDB_SEM_MAX_LLM_CALLS_PER_SESSION": "per connection (and its cursors): most backend LLM "
    "calls of all its queries (default none)",
    "DUCKDB_SEM_MAX_PROMPT_TOKENS_PER_SESSION": "per connection: most prompt tokens of all its "
    "queries (default none)",
    "DUCKDB_SEM_MAX_COST_PER_SESSION": "per connection: most USD spent by all its queries "
    "(default none)",
    "DUCKDB_SEM_PRICE_IN": "USD per million prompt tokens, for EXPLAIN SEMANTIC (default none)",
    "DUCKDB_SEM_PRICE_OUT": "USD per million completion tokens, for EXPLAIN SEMANTIC (default none)",
    "DUCKDB_SEM_MODELS": "named models for model := 'name', as name=spec;name=spec (default none)",
    "DUCKDB_SEM_EMBED_BACKEND": "embedding model spec (default minilm:)",
    "DUCKDB_SEM_APPROXIMATE": "allow approximate plans, e.g. sem_join blocking (default off)",
    "DUCKDB_SEM_JOIN_RECALL": "recall target of a blocked sem_join (default 0.95)",
    "DUCKDB_SEM_FILTER_PRECISION": "precision target of a cascaded sem_filter (default 0.9)",
    "DUCKDB_SEM_FILTER_RECALL": "recall target of a cascaded sem_filter (default 0.9)",
    "DUCKDB_SEM_FILTER_HELPER": "cascade helper: auto, estimator, embed or a backend spec",
    "DUCKDB_SEM_CONFIDENCE": "confidence that approximate plans meet their targets (default 0.9)",
    "DUCKDB_SEM_RETRY_FAILURES": "1: ask again for answers cached as failed (default 0: reuse them)",
    "DUCKDB_SEM_OPENAI_API_KEY": "API key of openai: backends (else OPENAI_API_KEY)",
    "DUCKDB_SEM_SIM_PROFILE": "duckdb-sem sim-server: the simulated GPU profile (default default)",
    "DUCKDB_SEM_SIM_LISTEN": "duckdb-sem sim-server: HOST:PORT to listen on",
    "DUCKDB_SEM_SIM_TIME_SCALE": "duckdb-sem sim-server: real seconds per simulated second",
    "DUCKDB_SEM_TEST_CACHE": "tests only: where slow fixtures (the HF copy of SmolLM2) are kept",
    "DUCKDB_SEM_BENCH_DATA": "benchmarks only: where fetched labelled data sets are kept",
}


def check_env(env: Mapping[str, str] | None = None) -> None:
    """Raise :class:`ConfigError` for a ``DUCKDB_SEM_*`` variable not declared in ENV_VARS."""
    env = os.environ if env is None else env
    unknown = sorted(k for k in env if k.startswith(ENV_PREFIX) and k not in ENV_VARS)
    if unknown:
        name = unknown[0]
        close = difflib.get_close_matches(name, ENV_VARS, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise ConfigError(
            f"unknown environment variable {name}{hint} Unset it, or use one of: "
            f"{', '.join(ENV_VARS)} (see the README's configuration table)"
        )


def _int_env(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    try:
        return int(raw) if raw else default
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an integer; set it to e.g. {default}") from None


def _limit_env(name: str) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a whole number; set it to e.g. 1000") from None
    if value < 0:
        raise ConfigError(f"{name} must be >= 0, got {value}; unset it for no limit")
    return value


def _money_env(name: str) -> float | None:
    """A limit in USD (``DUCKDB_SEM_MAX_COST``); unset: no limit."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an amount in USD; set it to e.g. 0.50") from None
    if not value >= 0 or value == float("inf"):
        raise ConfigError(f"{name} must be an amount >= 0 in USD, got {raw}; unset it for no limit")
    return value


def _price_env(name: str) -> float | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(
            f"{name}={raw!r} is not a number; set it to the backend's price in USD per million "
            "tokens, e.g. 0.15"
        ) from None
    return value


def parse_models(raw: str) -> tuple[tuple[str, str], ...]:
    """``name=spec;name=spec`` (``DUCKDB_SEM_MODELS``) as (name, spec) pairs."""
    out: list[tuple[str, str]] = []
    for part in raw.split(";"):
        if not part.strip():
            continue
        name, sep, spec = part.partition("=")
        if not sep or not name.strip() or not spec.strip():
            raise ConfigError(
                f"DUCKDB_SEM_MODELS: {part.strip()!r} is not name=spec; write e.g. "
                "fast=llama:;big=openai:http://127.0.0.1:8000/v1?model=m"
            )
        out.append((name.strip(), spec.strip()))
    return tuple(out)


def parse_bool(name: str, raw: str) -> bool:
    """``on/true/1/yes`` or ``off/false/0/no`` (any case); anything else is an error."""
    text = raw.strip().strip("'").lower()
    if text in {"on", "true", "1", "yes"}:
        return True
    if text in {"off", "false", "0", "no", ""}:
        return False
    raise ConfigError(f"{name}={raw!r} is not a switch; set it to on (1, true) or off (0, false)")


def _bool_env(name: str) -> bool:
    return parse_bool(name, os.environ.get(name, ""))


def _float_env(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    try:
        return float(raw) if raw else default
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number; set it to e.g. {default}") from None


def scheduler_token() -> str:
    """``DUCKDB_SEM_SCHEDULER_TOKEN``: the token a sidecar client sends when its URL has none
    (``""``: none)."""
    return os.environ.get("DUCKDB_SEM_SCHEDULER_TOKEN", "").strip()


def default_cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "duckdb-sem" / "llm_cache.sqlite"


def parse_cache(raw: str) -> Path | None:
    """A cache option as users write it: a file path, ``off`` (no cache) or empty (default)."""
    if raw.strip().lower() in {"off", "none", "0", "false"}:
        return None
    return Path(raw).expanduser() if raw.strip() else default_cache_path()


#: the planned road's defaults, written once: the Settings fields, the environment's defaults
#: and ``runtime.progress.RuntimeOptions`` all read these
RUNTIME = "adaptive"  # DUCKDB_SEM_RUNTIME
SEU_ROWS = 256  # DUCKDB_SEM_SEU_ROWS: rows of the driving table in the first SEU
ESTIMATOR_SAMPLE = 8  # DUCKDB_SEM_ESTIMATOR_SAMPLE: rows per operator the estimator answers


@dataclass(frozen=True, slots=True)
class Settings:
    backend: str = "llama:"
    cache_path: Path | None = None  # None: no persistent cache
    # a sidecar URL, "local" (scheduler/local.py) or "inprocess"; None: local for an embedded
    # backend (llama:), in process otherwise (scheduler/shared.py)
    scheduler_url: str | None = None
    scheduler_idle_s: float = 300.0  # a local sidecar exits after this long without a request
    batch_size: int = 64
    policy: str = "srtf"
    runtime: str = RUNTIME
    seu_rows: int = SEU_ROWS
    estimator_backend: str | None = None  # None: no small-model sampling
    estimator_sample: int = ESTIMATOR_SAMPLE
    aging_rate: float | None = None  # None: the policy's default
    max_llm_calls: int | None = None  # per query (runtime.budget); None: no limit
    max_prompt_tokens: int | None = None
    max_cost: float | None = None  # per query, USD at the models' prices (runtime.money)
    # per session: the sum over a connection's (and its cursors') queries (runtime.budget)
    max_llm_calls_per_session: int | None = None
    max_prompt_tokens_per_session: int | None = None
    max_cost_per_session: float | None = None
    # USD per million tokens, for EXPLAIN SEMANTIC's money line; None: no price configured
    price_per_mtok_in: float | None = None
    price_per_mtok_out: float | None = None
    models: tuple[tuple[str, str], ...] = ()  # named models: (name, backend spec)
    embed_backend: str = "minilm:"  # the embedding model (runtime.embeddings)
    approximate: bool = False  # lossy plans allowed (runtime.approximation)
    join_recall: float = 0.95  # recall target of a blocked sem_join
    filter_precision: float = 0.9  # targets of a cascaded sem_filter (runtime.cascade)
    filter_recall: float = 0.9
    filter_helper: str = "auto"  # the cascade's helper: auto, estimator, embed or a spec
    confidence: float = 0.9  # the approximate plans' targets hold at least this often
    #: ask the backend again for answers the cache holds as failed (unparsable: NULL)
    retry_failures: bool = False

    @staticmethod
    def from_env() -> Settings:
        env = os.environ
        check_env(env)
        cache = parse_cache(env.get("DUCKDB_SEM_CACHE", ""))
        batch_raw = env.get("DUCKDB_SEM_BATCH_SIZE", "64")
        try:
            batch = int(batch_raw)
        except ValueError:
            raise ConfigError(
                f"DUCKDB_SEM_BATCH_SIZE={batch_raw!r} is not an integer; set it to e.g. 64"
            ) from None
        aging_raw = env.get("DUCKDB_SEM_AGING_RATE", "")
        try:
            aging = float(aging_raw) if aging_raw else None
        except ValueError:
            raise ConfigError(
                f"DUCKDB_SEM_AGING_RATE={aging_raw!r} is not a number; set it to e.g. 100"
            ) from None
        settings = Settings(
            backend=env.get("DUCKDB_SEM_BACKEND", "llama:") or "llama:",
            cache_path=cache,
            scheduler_url=env.get("DUCKDB_SEM_SCHEDULER") or None,
            scheduler_idle_s=_float_env("DUCKDB_SEM_SCHEDULER_IDLE", 300.0),
            batch_size=batch,
            policy=env.get("DUCKDB_SEM_POLICY", "srtf") or "srtf",
            runtime=env.get("DUCKDB_SEM_RUNTIME", RUNTIME) or RUNTIME,
            seu_rows=_int_env("DUCKDB_SEM_SEU_ROWS", SEU_ROWS),
            estimator_backend=env.get("DUCKDB_SEM_ESTIMATOR_BACKEND") or None,
            estimator_sample=_int_env("DUCKDB_SEM_ESTIMATOR_SAMPLE", ESTIMATOR_SAMPLE),
            aging_rate=aging,
            max_llm_calls=_limit_env("DUCKDB_SEM_MAX_LLM_CALLS"),
            max_prompt_tokens=_limit_env("DUCKDB_SEM_MAX_PROMPT_TOKENS"),
            max_cost=_money_env("DUCKDB_SEM_MAX_COST"),
            max_llm_calls_per_session=_limit_env("DUCKDB_SEM_MAX_LLM_CALLS_PER_SESSION"),
            max_prompt_tokens_per_session=_limit_env("DUCKDB_SEM_MAX_PROMPT_TOKENS_PER_SESSION"),
            max_cost_per_session=_money_env("DUCKDB_SEM_MAX_COST_PER_SESSION"),
            price_per_mtok_in=_price_env("DUCKDB_SEM_PRICE_IN"),
            price_per_mtok_out=_price_env("DUCKDB_SEM_PRICE_OUT"),
            models=parse_models(env.get("DUCKDB_SEM_MODELS", "")),
            embed_backend=env.get("DUCKDB_SEM_EMBED_BACKEND") or "minilm:",
            approximate=_bool_env("DUCKDB_SEM_APPROXIMATE"),
            join_recall=_float_env("DUCKDB_SEM_JOIN_RECALL", 0.95),
            filter_precision=_float_env("DUCKDB_SEM_FILTER_PRECISION", 0.9),
            filter_recall=_float_env("DUCKDB_SEM_FILTER_RECALL", 0.9),
            filter_helper=env.get("DUCKDB_SEM_FILTER_HELPER") or "auto",
            confidence=_float_env("DUCKDB_SEM_CONFIDENCE", 0.9),
            retry_failures=_bool_env("DUCKDB_SEM_RETRY_FAILURES"),
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
        if self.seu_rows < 1 or self.estimator_sample < 0:
            raise ConfigError(
                f"SEU rows must be >= 1 and the estimator sample >= 0, got {self.seu_rows} "
                f"and {self.estimator_sample}"
            )
        if not 0.0 < self.join_recall <= 1.0:
            raise ConfigError(
                f"the join recall target must be in (0, 1], got {self.join_recall}; e.g. 0.95"
            )
        if not 0.0 < self.confidence < 1.0:
            raise ConfigError(
                f"the confidence of approximate plans must be in (0, 1), got {self.confidence}; "
                "e.g. 0.9"
            )
        if self.aging_rate is not None and self.aging_rate < 0:
            raise ConfigError(f"aging rate must be >= 0, got {self.aging_rate}")
        url = self.scheduler_url
        named = url in (None, "", LOCAL_SCHEDULER, INPROCESS_SCHEDULER)
        if not named and not str(url).startswith(_SIDECAR_SCHEMES):
            raise ConfigError(
                f"scheduler {url!r} is not a scheduler: use {LOCAL_SCHEDULER} (one sidecar "
                f"per user and backend), {INPROCESS_SCHEDULER} (this process's own) or a "
                "sidecar URL (http://HOST:PORT, unix:///path/to.sock); unset "
                "DUCKDB_SEM_SCHEDULER (scheduler=) for the default"
            )
        if not self.scheduler_idle_s > 0:
            raise ConfigError(
                f"DUCKDB_SEM_SCHEDULER_IDLE must be a number of seconds > 0, got "
                f"{self.scheduler_idle_s}; e.g. 300"
            )
        for name in ("price_per_mtok_in", "price_per_mtok_out"):
            price = getattr(self, name)
            if price is not None and (price < 0 or price != price):
                raise ConfigError(
                    f"{name} must be a price >= 0 in USD per million tokens, got {price}"
                )
