"""``duckdb-sem pgwire``: serve a database over the PostgreSQL wire protocol."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from duckdb_sem.errors import ConfigError

__all__ = ["pgwire"]

log = logging.getLogger(__name__)


def _split_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise click.BadParameter(f"expected HOST:PORT, got {listen!r}", param_hint="--listen")
    return host.strip("[]") or "127.0.0.1", int(port)


@click.command()
@click.option(
    "--db", "db_path", default=":memory:", show_default=True, help="DuckDB database file."
)
@click.option(
    "--listen", default="127.0.0.1:5433", show_default=True, help="HOST:PORT to listen on."
)
@click.option("--backend", default=None, help="LLM backend spec (default: DUCKDB_SEM_BACKEND).")
@click.option(
    "--scheduler",
    default=None,
    help="local, inprocess or a sidecar URL (default: local for llama:, else in process).",
)
@click.option("--cache", default=None, help="LLM cache file, or 'off'.")
@click.option("--read-only", is_flag=True, help="Open the database read-only.")
@click.option(
    "--users",
    "users_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="File of 'name:password' (or name:SCRAM verifier) lines; enables SCRAM-SHA-256.",
)
@click.option(
    "--tls-cert",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="PEM certificate; enables TLS.",
)
@click.option(
    "--tls-key",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="PEM private key for --tls-cert.",
)
@click.option("--require-tls", is_flag=True, help="Refuse connections without TLS.")
@click.option(
    "--allow-dir",
    "allow_dirs",
    multiple=True,
    help="Directory SQL may read and write (repeatable); all others stay closed.",
)
@click.option(
    "--external-access",
    is_flag=True,
    help="Let SQL reach any file, ATTACH and extensions (off by default).",
)
@click.option(
    "--postgres",
    "postgres",
    multiple=True,
    metavar="ALIAS=DSN",
    help="Attach a PostgreSQL database as a source, e.g. pg='host=127.0.0.1 dbname=test'.",
)
@click.option(
    "--threads",
    default=1,
    show_default=True,
    help="DuckDB threads (1 keeps per-query cancel and statistics exact).",
)
@click.option(
    "--max-connections",
    default=100,
    show_default=True,
    type=click.IntRange(1),
    help="Connections at once; one more gets FATAL 53300.",
)
@click.option(
    "--auth-timeout",
    default=10.0,
    show_default=True,
    type=click.FloatRange(0.1),
    help="Seconds a connection may take to start up and authenticate.",
)
@click.option(
    "--max-message",
    default=64,
    show_default=True,
    type=click.IntRange(1, 1024),
    help="Largest protocol message after authentication, in MiB (before it: 64 KiB).",
)
@click.option(
    "--max-llm-calls-per-query",
    type=click.IntRange(0),
    default=None,
    help="Cap on one query's backend LLM calls; clients may SET duckdb_sem.max_llm_calls lower, "
    "never higher (default: DUCKDB_SEM_MAX_LLM_CALLS, else none).",
)
@click.option(
    "--max-prompt-tokens-per-query",
    type=click.IntRange(0),
    default=None,
    help="Cap on one query's prompt tokens, as --max-llm-calls-per-query "
    "(default: DUCKDB_SEM_MAX_PROMPT_TOKENS, else none).",
)
@click.option(
    "--max-llm-calls-per-session",
    type=click.IntRange(0),
    default=None,
    help="Cap on the backend LLM calls of all of one session's queries (54000 once spent).",
)
@click.option(
    "--max-prompt-tokens-per-session",
    type=click.IntRange(0),
    default=None,
    help="Cap on the prompt tokens of all of one session's queries.",
)
@click.option(
    "--max-llm-calls-per-day",
    type=click.IntRange(0),
    default=None,
    help="Cap on the backend LLM calls of every session together in a UTC day.",
)
@click.option(
    "--max-prompt-tokens-per-day",
    type=click.IntRange(0),
    default=None,
    help="Cap on the prompt tokens of every session together in a UTC day.",
)
@click.option(
    "--max-cost-per-query",
    type=click.FloatRange(0),
    default=None,
    help="Cap in USD on one query's spend at the models' prices; clients may SET "
    "duckdb_sem.max_cost lower, never higher (default: DUCKDB_SEM_MAX_COST, else none).",
)
@click.option(
    "--max-cost-per-session",
    type=click.FloatRange(0),
    default=None,
    help="Cap in USD on the spend of all of one session's queries (54000 once spent).",
)
@click.option(
    "--max-cost-per-day",
    type=click.FloatRange(0),
    default=None,
    help="Cap in USD on the spend of every session together in a UTC day.",
)
def pgwire(
    db_path: str,
    listen: str,
    backend: str | None,
    scheduler: str | None,
    cache: str | None,
    read_only: bool,
    users_file: Path | None,
    tls_cert: str | None,
    tls_key: str | None,
    require_tls: bool,
    allow_dirs: tuple[str, ...],
    external_access: bool,
    postgres: tuple[str, ...],
    threads: int,
    max_connections: int,
    auth_timeout: float,
    max_message: int,
    max_llm_calls_per_query: int | None,
    max_prompt_tokens_per_query: int | None,
    max_llm_calls_per_session: int | None,
    max_prompt_tokens_per_session: int | None,
    max_llm_calls_per_day: int | None,
    max_prompt_tokens_per_day: int | None,
    max_cost_per_query: float | None,
    max_cost_per_session: float | None,
    max_cost_per_day: float | None,
) -> None:
    """Serve DB over the PostgreSQL wire protocol: psql, psycopg, BI tools, postgres_fdw.

    The --max-* caps bind every client: SET duckdb_sem.max_llm_calls may lower the per-query
    cap for its session, never raise or lift it (22023); RESET goes back to the cap. Clients'
    -c options (PGOPTIONS, psycopg options=) apply at connect, as in PostgreSQL.
    """
    from duckdb_sem.pgwire import Database, DatabaseOptions, ServerOptions, WireServer
    from duckdb_sem.pgwire.auth import load_users
    from duckdb_sem.pgwire.limits import OperatorLimits

    host, port = _split_listen(listen)
    sources: list[tuple[str, str]] = []
    for item in postgres:
        alias, sep, dsn = item.partition("=")
        if not sep or not alias.isidentifier():
            raise click.BadParameter(f"expected ALIAS=DSN, got {item!r}", param_hint="--postgres")
        sources.append((alias, dsn))
    if require_tls and not tls_cert:
        raise click.BadParameter("--require-tls needs --tls-cert", param_hint="--require-tls")
    try:
        users = load_users(users_file) if users_file else {}
        db = Database(
            DatabaseOptions(
                path=db_path,
                read_only=read_only,
                backend=backend,
                scheduler=scheduler,
                cache=cache,
                threads=threads,
                allowed_directories=allow_dirs,
                external_access=external_access,
                postgres=tuple(sources),
            )
        )
        server = WireServer(
            db,
            ServerOptions(
                host=host,
                port=port,
                users=users,
                tls_cert=tls_cert,
                tls_key=tls_key or tls_cert,
                require_tls=require_tls,
                max_connections=max_connections,
                auth_timeout=auth_timeout,
                max_message=max_message * 1024 * 1024,
                limits=OperatorLimits(
                    llm_calls_per_query=max_llm_calls_per_query,
                    prompt_tokens_per_query=max_prompt_tokens_per_query,
                    llm_calls_per_session=max_llm_calls_per_session,
                    prompt_tokens_per_session=max_prompt_tokens_per_session,
                    llm_calls_per_day=max_llm_calls_per_day,
                    prompt_tokens_per_day=max_prompt_tokens_per_day,
                    cost_per_query=max_cost_per_query,
                    cost_per_session=max_cost_per_session,
                    cost_per_day=max_cost_per_day,
                ),
            ),
        )
    except ConfigError as err:
        raise click.ClickException(str(err)) from err
    click.echo(
        f"duckdb-sem pgwire: listening on {host}:{server.port} (database {db.name})", err=True
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
