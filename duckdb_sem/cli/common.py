"""Options shared by commands that open a connection."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

__all__ = ["connection_options"]

F = TypeVar("F", bound=Callable[..., Any])


def connection_options(fn: F) -> F:
    fn = click.option(
        "--backend",
        envvar="DUCKDB_SEM_BACKEND",
        default="llama:",
        show_default=True,
        help="LLM backend spec: llama:, test:, sim:default, openai:URL?model=M, vllm:PATH.",
    )(fn)
    fn = click.option(
        "--cache",
        envvar="DUCKDB_SEM_CACHE",
        default=None,
        help="LLM-call cache file, or 'off' [default: ~/.cache/duckdb-sem/llm_cache.sqlite].",
    )(fn)
    fn = click.option(
        "--scheduler",
        envvar="DUCKDB_SEM_SCHEDULER",
        default=None,
        help="Sidecar scheduler URL (default: schedule in this process).",
    )(fn)
    return fn
