"""Backends are chosen by a spec string: ``KIND:TARGET?key=value&...``.

========  =====================================================  ==============================
kind      example                                                what
========  =====================================================  ==============================
llama     ``llama:`` or ``llama:/path/model.gguf?threads=2``     embedded llama.cpp (default)
test      ``test:?yes_if=good&latency_ms=0``                     deterministic rules, for tests
========  =====================================================  ==============================

Embedding models (``minilm:``, ``openai-embed:``, ``sim-embed:``; see :mod:`.embedder`) are
backends too, chosen by ``DUCKDB_SEM_EMBED_BACKEND``.

Other kinds (``openai:``, ``vllm:``, ``sim:``) register themselves in ``_FACTORIES`` from their
own modules; the registry imports a backend's module only when its kind is asked for.

Each backend module declares the options its spec takes in ``OPTIONS`` (a tuple of
:class:`SpecOption`, documented in docs/backends.md); an option it does not declare is an
error naming the valid ones, with the closest as a suggestion (``modle`` -> ``model``), never
silently ignored.

Every kind also takes ``price_in`` and ``price_out`` (USD per million prompt / completion
tokens, :data:`PRICE_OPTIONS`): what the model costs, for ``EXPLAIN SEMANTIC``'s money line.
They never reach the backend and change no answer, so ``openai:...?price_in=0.15`` and the same
spec without a price are one backend, one scheduler and one cache identity
(:func:`split_price`).
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl

from duckdb_sem.backends.base import Backend
from duckdb_sem.errors import ConfigError

__all__ = [
    "PRICE_OPTIONS",
    "BackendSpec",
    "SpecOption",
    "SpecPrice",
    "create_backend",
    "known_kinds",
    "options_of",
    "parse_spec",
    "split_price",
    "unknown_name_error",
]

# kind -> "module:factory"; the factory takes a BackendSpec and returns a Backend.
_FACTORIES: dict[str, str] = {
    "llama": "duckdb_sem.backends.llama_default:from_spec",
    "test": "duckdb_sem.backends.rules:from_spec",
    "openai": "duckdb_sem.backends.openai:from_spec",
    "vllm": "duckdb_sem.backends.vllm:from_spec",
    "sim": "duckdb_sem.backends.sim:from_spec",
    # embedding models (``backends.embedder``): DUCKDB_SEM_EMBED_BACKEND
    "minilm": "duckdb_sem.backends.minilm:from_spec",
    "openai-embed": "duckdb_sem.backends.openai_embed:from_spec",
    "sim-embed": "duckdb_sem.backends.sim.embeddings:from_spec",
}


@dataclass(frozen=True, slots=True)
class SpecOption:
    """One ``key=value`` a backend spec accepts; ``answers``: it can change answers, so it is
    part of the backend's identity (and the cache key)."""

    name: str
    doc: str
    answers: bool = False


def unknown_name_error(what: str, name: str, valid: Iterable[str]) -> str:
    """``unknown WHAT 'name'; did you mean 'x'? Valid: a, b, c`` (difflib's closest match)."""
    names = sorted(set(valid))
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown {what} {name!r}{hint} Valid: {', '.join(names) or '(none)'}"


@dataclass(frozen=True, slots=True)
class BackendSpec:
    raw: str
    kind: str
    target: str
    options: tuple[tuple[str, str], ...]

    def check_options(self, known: Sequence[SpecOption]) -> None:
        """Raise :class:`ConfigError` for an option that is not in ``known``."""
        names = {o.name for o in known}
        for key, _ in self.options:
            if key not in names:
                raise ConfigError(
                    f"backend {self.raw!r}: "
                    + unknown_name_error(f"{self.kind}: option", key, names)
                )

    def option(self, key: str, default: str | None = None) -> str | None:
        for k, v in self.options:
            if k == key:
                return v
        return default

    def int_option(self, key: str, default: int) -> int:
        value = self.option(key)
        if value is None:
            return default
        try:
            return int(value)
        except ValueError:
            raise ConfigError(
                f"backend {self.raw!r}: option {key}={value!r} must be an integer"
            ) from None

    def on_off_option(self, key: str, default: bool) -> bool:
        value = self.option(key)
        if value is None:
            return default
        if value.lower() not in ("on", "off"):
            raise ConfigError(f"backend {self.raw!r}: option {key}={value!r} must be on or off")
        return value.lower() == "on"

    def float_option(self, key: str, default: float) -> float:
        value = self.option(key)
        if value is None:
            return default
        try:
            return float(value)
        except ValueError:
            raise ConfigError(
                f"backend {self.raw!r}: option {key}={value!r} must be a number"
            ) from None


#: the options every kind takes: a model's price (they never reach the backend)
PRICE_OPTIONS = (
    SpecOption("price_in", "USD per million prompt tokens (EXPLAIN SEMANTIC's money line)"),
    SpecOption("price_out", "USD per million completion tokens (EXPLAIN SEMANTIC's money line)"),
)
_PRICE_KEYS = frozenset(o.name for o in PRICE_OPTIONS)


@dataclass(frozen=True, slots=True)
class SpecPrice:
    """A model's price from its spec, in USD per million tokens."""

    prompt_per_mtok: float
    completion_per_mtok: float


def split_price(spec: str) -> tuple[str, SpecPrice | None]:
    """``spec`` without its ``price_in`` / ``price_out`` options, and the price they set.

    Example:
        >>> split_price("openai:http://h/v1?model=m&price_in=0.15&price_out=0.6")
        ('openai:http://h/v1?model=m', SpecPrice(prompt_per_mtok=0.15, completion_per_mtok=0.6))
    """
    head, sep, query = spec.strip().rpartition("?")
    if not sep:
        return spec.strip(), None
    kept, price = [], {}
    for part in query.split("&"):
        key, _, value = part.partition("=")
        if key not in _PRICE_KEYS:
            kept.append(part)
            continue
        try:
            price[key] = float(value)
        except ValueError:
            raise ConfigError(
                f"backend {spec!r}: option {key}={value!r} must be a price in USD per million "
                "tokens, e.g. price_in=0.15"
            ) from None
        if price[key] < 0 or price[key] != price[key]:
            raise ConfigError(f"backend {spec!r}: option {key}={value!r} must be >= 0")
    if not price:
        return spec.strip(), None
    rest = head + ("?" + "&".join(kept) if kept else "")
    return rest, SpecPrice(price.get("price_in", 0.0), price.get("price_out", 0.0))


def known_kinds() -> tuple[str, ...]:
    return tuple(_FACTORIES)


def parse_spec(spec: str) -> BackendSpec:
    """Split ``KIND:TARGET?k=v`` into its parts; the kind must be known."""
    raw = spec.strip()
    kind, sep, rest = raw.partition(":")
    if not sep or kind not in _FACTORIES:
        close = difflib.get_close_matches(kind, _FACTORIES, n=1)
        hint = f"; did you mean {close[0] + ':'!r}?" if close else ""
        raise ConfigError(
            f"unknown backend {spec!r}{hint} Use KIND:TARGET with KIND one of "
            f"{', '.join(_FACTORIES)} (for example 'llama:' for the embedded model)"
        )
    # openai targets are URLs and carry their own '?': the last '?' starts our options.
    target, _, query = rest.rpartition("?") if "?" in rest else (rest, "", "")
    options = tuple(parse_qsl(query, keep_blank_values=True))
    return BackendSpec(raw=raw, kind=kind, target=target, options=options)


def create_backend(spec: str | Backend) -> Backend:
    """Build a backend from its spec string (a ready ``Backend`` is returned as is)."""
    if isinstance(spec, Backend):
        return spec
    parsed = parse_spec(split_price(spec)[0])
    module_name, _, attr = _FACTORIES[parsed.kind].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        raise ConfigError(
            f"backend kind {parsed.kind!r} is not available: {err}. "
            "Install the package it needs (see docs/backends.md)."
        ) from err
    parsed.check_options(module.OPTIONS)
    backend: Backend = getattr(module, attr)(parsed)
    return backend


def options_of(kind: str) -> tuple[SpecOption, ...]:
    """The options ``kind``'s spec accepts (imports its module; vLLM itself is not needed)."""
    module_name = _FACTORIES[kind].partition(":")[0]
    options: tuple[SpecOption, ...] = importlib.import_module(module_name).OPTIONS
    return options
