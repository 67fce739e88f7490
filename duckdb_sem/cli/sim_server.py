"""``duckdb-sem sim-server``: serve the SIMULATED GPU backend over an OpenAI-compatible API.

Example: ``duckdb-sem sim-server --profile default --listen 127.0.0.1:8100 --time-scale 0.01``
then point any OpenAI client (or ``openai:http://127.0.0.1:8100/v1``) at it.
"""

from __future__ import annotations

import click

from duckdb_sem.errors import ConfigError

__all__ = ["sim_server"]


def _split_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise click.BadParameter(f"{listen!r}: use HOST:PORT, e.g. 127.0.0.1:8100")
    return host or "127.0.0.1", int(port)


@click.command("sim-server")
@click.option(
    "--profile",
    default="default",
    show_default=True,
    envvar="DUCKDB_SEM_SIM_PROFILE",
    help="Simulated deployment (see docs/backends.md).",
)
@click.option(
    "--listen",
    default="127.0.0.1:8100",
    show_default=True,
    envvar="DUCKDB_SEM_SIM_LISTEN",
    help="HOST:PORT to listen on.",
)
@click.option(
    "--selectivity",
    type=float,
    default=0.5,
    show_default=True,
    help="Fraction of yes answers of the hash oracle.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the hash oracle.")
@click.option(
    "--labels",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="CSV with key,label columns: answers for known rows (others use the hash).",
)
@click.option("--positive", default=None, help="Labels that mean yes, separated by '|'.")
@click.option(
    "--time-scale",
    type=float,
    default=0.0,
    show_default=True,
    envvar="DUCKDB_SEM_SIM_TIME_SCALE",
    help="Real seconds slept per simulated second (0: virtual clock only).",
)
@click.option(
    "--rpm",
    type=float,
    default=0.0,
    show_default=True,
    help="Requests (completions and embeddings) per minute served; above it HTTP 429 with "
    "Retry-After (0: no limit).",
)
@click.option(
    "--tpm",
    type=float,
    default=0.0,
    show_default=True,
    help="Tokens per minute (prompt + max_tokens; an embedding's input) served; above it "
    "HTTP 429 (0: no limit).",
)
def sim_server(
    profile: str,
    listen: str,
    selectivity: float,
    seed: int,
    labels: str | None,
    positive: str | None,
    time_scale: float,
    rpm: float,
    tpm: float,
) -> None:
    """Serve a SIMULATED GPU (vLLM-like timing, oracle answers) as an OpenAI-compatible API."""
    from urllib.parse import urlencode

    from duckdb_sem.backends.rate_limit import RateLimit
    from duckdb_sem.backends.sim.backend import create
    from duckdb_sem.backends.sim.server import SimServer

    host, port = _split_listen(listen)
    options: dict[str, str | float] = {
        "selectivity": selectivity,
        "seed": seed,
        "time_scale": time_scale,
    }
    if labels:
        options["labels"] = labels
    if positive:
        options["positive"] = positive
    try:
        backend = create(f"sim:{profile}?{urlencode(options)}")
        limit = RateLimit(rpm=rpm or None, tpm=tpm or None)
        server = SimServer(backend, host=host, port=port, rate_limit=limit)
    except (ConfigError, OSError) as err:
        raise click.ClickException(str(err)) from None
    click.echo(f"SIMULATED server on {server.base_url} — {backend.describe()}", err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        backend.close()
