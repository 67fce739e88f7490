"""``duckdb-sem top``: the scheduler sidecar's queries, queue and replicas, live.

Example::

    duckdb-sem top --url http://127.0.0.1:7300
"""

from __future__ import annotations

import time
from typing import Any

import click
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from duckdb_sem.errors import SidecarError

__all__ = ["render", "top"]


def render(status: dict[str, Any]) -> Group:
    sim = " [bold red]SIMULATED[/]" if status.get("simulated") else ""
    usage = status["usage"]
    saved = usage["fused_calls"] + usage["cache_calls"]
    head = (
        f"[bold]{status['backend_id']}[/]{sim}  policy [bold]{status['policy']}[/]  "
        f"queue {status['queue_length']} SEUs / {status['queued_requests']} req  "
        f"in flight {status['in_flight_requests']} req  {status['tokens_per_s']:.0f} tok/s  "
        f"calls {usage['virtual_calls']} virtual, {usage['physical_calls']} physical, "
        f"{saved} saved ({usage['fused_calls']} fused, {usage['cache_calls']} cache)"
    )
    queries = Table(title="queries", expand=True)
    for col in (
        "query",
        "connection",
        "state",
        "operator",
        "age s",
        "remaining",
        "attained",
        "SEUs",
        "physical",
        "fused",
        "cache",
    ):
        queries.add_column(
            col, justify="left" if col in ("query", "connection", "state", "operator") else "right"
        )
    live = sorted(status["queries"], key=lambda q: (q["state"] == "idle", q["remaining_cost"]))
    for q in live:
        u = q["usage"]
        queries.add_row(
            q["query_id"],
            q["connection"],
            q["state"],
            q["operator"],
            f"{q['age_s']:.1f}",
            f"{q['remaining_cost']:.0f}",
            f"{q['attained_tokens']:.0f}",
            str(q["seus"]),
            str(u["physical_calls"]),
            str(u["fused_calls"]),
            str(u["cache_calls"]),
        )
    replicas = Table(title="replicas", expand=True)
    for col in ("#", "backend", "dispatches", "requests", "tokens", "done"):
        replicas.add_column(col)
    for r in status["replicas"]:
        replicas.add_row(
            str(r["replica"]),
            r["backend"],
            str(r["dispatches_in_flight"]),
            f"{r['requests_in_flight']}/{r['max_requests']}",
            f"{r['tokens_in_flight']}/{r['max_tokens'] or '-'}",
            str(r["completed_requests"]),
        )
    return Group(head, queries, replicas)


@click.command()
@click.option(
    "--url",
    envvar="DUCKDB_SEM_SCHEDULER",
    default="http://127.0.0.1:7300",
    show_default=True,
    help="The sidecar's URL.",
)
@click.option(
    "--interval", type=float, default=1.0, show_default=True, help="Seconds between refreshes."
)
@click.option("--once", is_flag=True, help="Print one snapshot and exit.")
def top(url: str, interval: float, once: bool) -> None:
    """Show the scheduler sidecar's running queries live."""
    from duckdb_sem.scheduler.sidecar_client import SidecarClient

    try:
        client = SidecarClient(url, workers=1)
    except SidecarError as err:
        raise click.ClickException(str(err)) from None
    console = Console()
    try:
        if once:
            console.print(render(client.status()))
            return
        with Live(render(client.status()), console=console, refresh_per_second=4) as live:
            while True:
                time.sleep(interval)
                live.update(render(client.status()))
    except KeyboardInterrupt:
        pass
    except SidecarError as err:
        raise click.ClickException(str(err)) from None
    finally:
        client.close()
