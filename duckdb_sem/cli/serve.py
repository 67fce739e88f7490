"""``duckdb-sem serve``: run the scheduler sidecar that every connection and process can share.

Example::

    duckdb-sem serve --backend llama: --listen 127.0.0.1:7300 --policy srtf
    DUCKDB_SEM_SCHEDULER=http://127.0.0.1:7300 python my_app.py

Give ``--backend`` several times for replicas of one model (e.g. two vLLM servers);
``--placement`` picks the replica for new work: the least loaded one, or ``prefix-affinity``
(an instruction stays on the replica whose prefix cache holds it, within a load bound).
``--listen unix:/path/sem.sock`` serves on a unix socket. ``--idle-exit SECONDS`` exits after
that long without a request (``DUCKDB_SEM_SCHEDULER=local`` starts it so).

A TCP sidecar requires a token on every request (:mod:`duckdb_sem.scheduler.sidecar_auth`):
``--token`` (clients) and ``--operator-token`` (sees and cancels every client's queries), each
generated unless given, written to ``--token-file`` (mode 0600; by default
``$TMPDIR/duckdb-sem-<uid>/sidecar-<port>.token``). The start line prints the URL clients use,
with a generated client token in it; a token given is never printed. A unix socket needs no
token (only its user's processes are served) unless one is given.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

import click

from duckdb_sem.backends.cpu_turns import lock_dir
from duckdb_sem.backends.registry import create_backend
from duckdb_sem.config import Settings, default_cache_path
from duckdb_sem.errors import UnsafePathError
from duckdb_sem.scheduler.admission import ReplicaLimits
from duckdb_sem.scheduler.core import Scheduler
from duckdb_sem.scheduler.placement import PLACEMENTS, make_placement
from duckdb_sem.scheduler.policies import POLICIES, make_policy
from duckdb_sem.scheduler.safe_paths import open_own_file, private_folder
from duckdb_sem.scheduler.shared import open_cache
from duckdb_sem.scheduler.sidecar_auth import SidecarTokens
from duckdb_sem.scheduler.sidecar_server import SidecarServer, parse_listen

__all__ = ["serve"]

log = logging.getLogger(__name__)


@click.command()
@click.option(
    "--backend",
    "backends",
    multiple=True,
    envvar="DUCKDB_SEM_BACKEND",
    default=("llama:",),
    show_default=True,
    help="Backend spec; repeat for replicas of the same model.",
)
@click.option(
    "--listen", default="127.0.0.1:7300", show_default=True, help="HOST:PORT or unix:/path."
)
@click.option(
    "--policy",
    type=click.Choice(POLICIES),
    envvar="DUCKDB_SEM_POLICY",
    default="srtf",
    show_default=True,
)
@click.option(
    "--aging-rate",
    type=float,
    envvar="DUCKDB_SEM_AGING_RATE",
    default=None,
    help="srtf/joint: cost units (tokens) per second of waiting [default: 100].",
)
@click.option(
    "--cache",
    envvar="DUCKDB_SEM_CACHE",
    default=None,
    help="LLM-call cache file, or 'off' [default: ~/.cache/duckdb-sem/llm_cache.sqlite].",
)
@click.option(
    "--placement",
    type=click.Choice(PLACEMENTS),
    default="least-loaded",
    show_default=True,
    help="Replica for new work with several --backend: least loaded, or prefix affinity.",
)
@click.option(
    "--load-factor",
    type=float,
    default=None,
    help="prefix-affinity: a replica keeps its prefixes up to this x the mean load [1.25].",
)
@click.option(
    "--max-inflight-dispatches",
    type=click.IntRange(min=1),
    default=None,
    help="Per replica: SEUs in flight at once [backend's batches, 2 for openai:]; about 2x the "
    "servers behind a router.",
)
@click.option("--max-inflight-requests", type=int, default=None, help="Per replica.")
@click.option("--max-inflight-tokens", type=int, default=None, help="Per replica (estimated).")
@click.option(
    "--idle-exit",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Exit after this many seconds without a request [default: never].",
)
@click.option(
    "--token",
    envvar="DUCKDB_SEM_SCHEDULER_TOKEN",
    default=None,
    help="The client token every request must carry [TCP: generated; unix: none].",
)
@click.option(
    "--operator-token",
    envvar="DUCKDB_SEM_SCHEDULER_OPERATOR_TOKEN",
    default=None,
    help="The token that sees and cancels every client's queries [generated].",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where the tokens are written, mode 0600 "
    "[$TMPDIR/duckdb-sem-<uid>/sidecar-<port>.token; unix: <socket>.token].",
)
def serve(
    backends: tuple[str, ...],
    listen: str,
    policy: str,
    aging_rate: float | None,
    cache: str | None,
    placement: str,
    load_factor: float | None,
    max_inflight_dispatches: int | None,
    max_inflight_requests: int | None,
    max_inflight_tokens: int | None,
    idle_exit: float | None,
    token: str | None,
    operator_token: str | None,
    token_file: Path | None,
) -> None:
    """Run the scheduler sidecar: one queue, one cache and fusion for every client."""
    where = parse_listen(listen)
    tokens = None
    if not isinstance(where, str) or token or operator_token:
        try:
            tokens = SidecarTokens.make(token or None, operator_token or None)
        except ValueError:
            raise click.UsageError("--token and --operator-token must differ") from None
    built = [create_backend(spec) for spec in backends]
    limits = [
        ReplicaLimits.for_backend(
            b, max_requests=max_inflight_requests, max_tokens=max_inflight_tokens
        )
        for b in built
    ]
    if max_inflight_dispatches is not None:
        limits = [
            dataclasses.replace(lim, max_dispatches=max_inflight_dispatches) for lim in limits
        ]
    cache_path = None
    if cache is None:
        cache_path = default_cache_path()
    elif cache.lower() not in {"off", "none", "0", "false", ""}:
        cache_path = Path(cache).expanduser()
    scheduler = Scheduler(
        built,
        policy=make_policy(policy, aging_rate=aging_rate),
        cache=open_cache(cache_path, retry_failures=Settings.from_env().retry_failures),
        limits=limits,
        placement=make_placement(placement, load_factor=load_factor),
    )
    server = SidecarServer(scheduler, listen, tokens=tokens)
    written = None
    if tokens is not None:  # before serving: a refused token file stops the start cleanly
        try:
            written = _write_tokens(tokens, token_file or _token_file(server.url), server.url)
        except UnsafePathError as err:
            server.shutdown()  # removes a unix socket it bound
            scheduler.close()
            for backend in built:
                backend.close()
            raise click.ClickException(str(err)) from None
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    server.start()
    if idle_exit is not None:
        threading.Thread(
            target=_exit_when_idle, args=(server, idle_exit, stop), name="sem-idle", daemon=True
        ).start()
    described = "; ".join(b.describe() for b in built)
    shown = server.url
    if tokens is not None and not token:  # made here: the operator learns it from this line
        shown = shown.replace("://", f"://:{tokens.client}@", 1)
    click.echo(
        f"duckdb-sem scheduler listening on {shown} (policy {policy}, "
        f"placement {placement}, {len(built)} replica(s): {described}, cache {cache_path or 'off'})",
        err=True,
    )
    if tokens is not None:
        click.echo(
            f"duckdb-sem scheduler: every request needs a token; the client and operator "
            f"tokens are in {written} (mode 0600). Clients: DUCKDB_SEM_SCHEDULER="
            f"{server.url.replace('://', '://:TOKEN@', 1)} or DUCKDB_SEM_SCHEDULER_TOKEN; the "
            "operator token sees and cancels every client's queries (duckdb-sem top)",
            err=True,
        )
    sys.stderr.flush()
    stop.wait()
    click.echo("duckdb-sem scheduler: shutting down", err=True)
    server.shutdown()
    scheduler.close()
    for backend in built:
        backend.close()


def _token_file(url: str) -> Path:
    """The default token file: beside a unix socket, else in the user's private folder."""
    if url.startswith("unix://"):
        return Path(url.removeprefix("unix://") + ".token")
    port = url.rpartition(":")[2]
    return private_folder(lock_dir()) / f"sidecar-{port}.token"


def _write_tokens(tokens: SidecarTokens, path: Path, url: str) -> Path:
    """Write the tokens to ``path`` (mode 0600, never through a symlink), as lines a shell
    can source."""
    fd = open_own_file(path, truncate=True)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(
            f"# duckdb-sem serve on {url} (pid {os.getpid()})\n"
            f"DUCKDB_SEM_SCHEDULER_TOKEN={tokens.client}\n"
            f"DUCKDB_SEM_SCHEDULER_OPERATOR_TOKEN={tokens.operator}\n"
        )
    return path


#: after retiring its socket, how long a sidecar goes on serving connections already open
#: (a client that attached just before) before it exits
_RETIRE_GRACE_S = 2.0


def _exit_when_idle(server: SidecarServer, idle_s: float, stop: threading.Event) -> None:
    """Set ``stop`` once the server has been idle ``idle_s`` and could retire its socket."""
    while server.activity.wait_idle(idle_s, stop):
        if not server.retire():  # a process is starting a sidecar: not now
            stop.wait(1.0)
            continue
        server.activity.wait_idle(_RETIRE_GRACE_S, stop)
        click.echo(f"duckdb-sem scheduler: idle for {idle_s:g} s, exiting", err=True)
        stop.set()
        return
