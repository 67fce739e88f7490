"""``duckdb-sem top``: the scheduler sidecar's queries, queue and replicas, live.

A query's ``run/fus/hit`` move after every backend batch; a finished query shows ``done`` with
nothing left for a few seconds (``scheduler.queries.DONE_SHOWN_S``), then is gone.

Example::

    duckdb-sem top --url http://127.0.0.1:7300
"""

from __future__ import annotations

import time
from typing import Any

import click
from rich import box
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from duckdb_sem.errors import SidecarError

__all__ = ["render", "top"]

WIDE = 100  # from this many columns on, the connection and attained tokens are shown too


def _short(value: float) -> str:
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return (
                f"{value / size:.1f}{unit}"
                if abs(value) < size * 10
                else f"{value / size:,.0f}{unit}"
            )
    return f"{value:,.0f}"


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def render(status: dict[str, Any], *, width: int = 80) -> Group:
    """The sidecar's ``/v1/status`` as a header and two tables that fit ``width`` columns:
    one line per query and per replica, long names cut with an ellipsis, never wrapped."""
    sim = " SIMULATED" if status.get("simulated") else ""
    usage = status["usage"]
    head = [
        _fit(f"{status['backend_id']}{sim}", width),
        _fit(
            f"policy {status['policy']}  queue {status['queue_length']} SEUs / "
            f"{status['queued_requests']} req  in flight {status['in_flight_requests']} req  "
            f"{status['tokens_per_s']:,.0f} tok/s",
            width,
        ),
        _fit(
            f"calls {usage['virtual_calls']:,} asked: {usage['physical_calls']:,} run, "
            f"{usage['fused_calls']:,} fused, {usage['cache_calls']:,} from cache",
            width,
        ),
    ]
    wide = width >= WIDE
    queries = Table(title="queries", box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
    # (name, justify, min width, max width): at 80 columns the compact set fits on one line
    columns: list[tuple[str, str, int | None, int | None]] = [
        ("query", "left", 8, 24 if wide else 14)
    ]
    if wide:
        columns.append(("connection", "left", 8, 24))
    columns += [("state", "left", 7, 8), ("operator", "left", 8, 14 if wide else 12),
                ("age", "right", None, None), ("left", "right", None, None)]  # fmt: skip
    if wide:
        columns.append(("attained", "right", None, None))
    columns += [("SEUs", "right", None, None), ("run/fus/hit", "right", None, None)]
    for name, justify, min_width, max_width in columns:
        queries.add_column(name, justify=justify, no_wrap=True, overflow="ellipsis",  # type: ignore[arg-type]
                           min_width=min_width, max_width=max_width)  # fmt: skip
    # running and queued first, then idle (between two SEUs), then done (gone a few s later)
    order = {"idle": 1, "done": 2}
    live = sorted(status["queries"], key=lambda q: (order.get(q["state"], 0), q["remaining_cost"]))
    for q in live:
        u = q["usage"]
        cells = [q["query_id"]]
        if wide:
            cells.append(q["connection"])
        left = "-" if q["state"] == "done" else _short(q["remaining_cost"])
        cells += [q["state"], q["operator"], f"{q['age_s']:.0f}", left]
        if wide:
            cells.append(_short(q["attained_tokens"]))
        cells += [
            str(q["seus"]),
            f"{u['physical_calls']}/{u['fused_calls']}/{u['cache_calls']}",
        ]
        queries.add_row(*cells)
    replicas = Table(title="replicas", box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
    for name, justify in (("#", "right"), ("backend", "left"), ("batches", "right"),
                          ("requests", "right"), ("tokens", "right"), ("done", "right")):  # fmt: skip
        replicas.add_column(name, justify=justify, no_wrap=True, overflow="ellipsis",  # type: ignore[arg-type]
                            max_width=width - 45 if name == "backend" else None)  # fmt: skip
    for r in status["replicas"]:
        replicas.add_row(
            str(r["replica"]),
            r["backend"],
            str(r["dispatches_in_flight"]),
            f"{r['requests_in_flight']}/{r['max_requests']}",
            f"{_short(r['tokens_in_flight'])}/{_short(r['max_tokens']) if r['max_tokens'] else '-'}",
            _short(r["completed_requests"]),
        )
    return Group(*(Text(line) for line in head), queries, replicas)


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
            console.print(render(client.status(), width=console.width))
            return
        first = render(client.status(), width=console.width)
        with Live(first, console=console, refresh_per_second=4) as live:
            while True:
                time.sleep(interval)
                live.update(render(client.status(), width=console.width))
    except KeyboardInterrupt:
        pass
    except SidecarError as err:
        raise click.ClickException(str(err)) from None
    finally:
        client.close()
