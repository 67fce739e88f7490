"""Options shared by commands that open a connection, and the environment in ``--help``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from duckdb_sem.config import ENV_VARS

__all__ = ["connection_options", "env_epilog"]

F = TypeVar("F", bound=Callable[..., Any])


def env_epilog() -> str:
    """The ``DUCKDB_SEM_*`` variables (``config.ENV_VARS``) as a ``--help`` epilog, one a line
    (``\\b`` keeps click from re-wrapping them)."""
    width = max(map(len, ENV_VARS))
    lines = [f"  {name.ljust(width)}  {doc}" for name, doc in ENV_VARS.items()]
    return "\b\nEnvironment variables (options given here win over them):\n" + "\n".join(lines)


def connection_options(fn: F) -> F:
    fn = click.option(
        "--backend",
        envvar="DUCKDB_SEM_BACKEND",
        show_envvar=True,
        default="llama:",
        show_default=True,
        help="LLM backend spec: llama:, test:, sim:default, openai:URL?model=M, vllm:PATH.",
    )(fn)
    fn = click.option(
        "--cache",
        envvar="DUCKDB_SEM_CACHE",
        show_envvar=True,
        default=None,
        help="LLM-call cache file, or 'off' [default: ~/.cache/duckdb-sem/llm_cache.sqlite].",
    )(fn)
    fn = click.option(
        "--scheduler",
        envvar="DUCKDB_SEM_SCHEDULER",
        show_envvar=True,
        default=None,
        help="local, inprocess or a sidecar scheduler URL (default: local for llama:, in "
        "process otherwise).",
    )(fn)
    return fn
