"""Run a statement with a progress line on stderr, and Ctrl-C that cancels cleanly.

The statement runs in a worker thread; the main thread reports its progress. On a terminal it
is a live status line that fits the terminal's width; when stderr is not a terminal (a log
file, CI, a pipe) it is a plain-text line every ``every`` seconds, and nothing for a statement
that finishes sooner. The share done is the SEU loop's (``con.semantic_progress()``: rows of the
driving table processed, reported at every SEU boundary) for a planned query, otherwise
DuckDB's own estimate; beside it, the LLM requests asked, run by the backend and answered from
the cache, and a planned query's estimated remaining work. Within an SEU (a 20-row query is
one) the rows and requests move after every backend batch: :class:`LiveProgress` listens to the
``Progress`` events the runtime emits then (``con.on_progress``). Ctrl-C becomes
:meth:`SemConnection.interrupt`, which drops the query's queued LLM work.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console

from duckdb_sem.errors import QueryCancelledError
from duckdb_sem.optimizer.cost import DEFAULTS
from duckdb_sem.runtime.context import Progress
from duckdb_sem.session.connection import SemConnection

__all__ = ["LiveProgress", "PlanShare", "progress_line", "run_with_progress"]


def run_with_progress(
    con: SemConnection,
    sql: str,
    *,
    console: Console,
    quiet: bool = False,
    every: float = 5.0,
    clock: Callable[[], float] = time.monotonic,
) -> Any:
    """Execute ``sql`` and return its result as a ``pyarrow.Table``."""
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["table"] = con.execute(sql).arrow()
        except BaseException as err:  # noqa: BLE001 - re-raised in the main thread
            outcome["error"] = err

    worker = threading.Thread(target=work, name="duckdb-sem-query", daemon=True)
    share = PlanShare()
    live = LiveProgress(con.on_progress)
    con.on_progress = live
    started = clock()
    worker.start()
    try:
        if quiet:
            worker.join()
        elif console.is_terminal:
            with console.status("starting", spinner="dots") as status:
                while worker.is_alive():
                    worker.join(timeout=0.2)
                    width = max(20, console.width - 3)
                    status.update(progress_line(con, width=width, share=share, live=live))
        else:
            while worker.is_alive():
                worker.join(timeout=every)
                if worker.is_alive():
                    line = progress_line(con, elapsed=clock() - started, share=share, live=live)
                    console.file.write(f"duckdb-sem: {line}\n")
                    console.file.flush()
    except KeyboardInterrupt:
        con.interrupt()
        worker.join(timeout=30)
        raise QueryCancelledError(
            "query cancelled by Ctrl-C; finished LLM calls stay cached"
        ) from None
    finally:
        con.on_progress = live.chained
    if "error" in outcome:
        raise outcome["error"]
    return outcome["table"]


class LiveProgress:
    """What the running query answered inside its SEU in flight, from the ``Progress`` events
    the runtime emits after every backend batch (install it as ``con.on_progress``;
    ``chained``, the listener that was there, still gets every event).

    Per operator call the events count its requests answered out of those it asked; the
    largest share seen in the current SEU counts that share of the SEU's driving rows as done,
    and the answers not yet in ``con.stats()`` (which counts an SEU when it ends) are added to
    the calls shown.
    """

    def __init__(self, chained: Callable[[Progress], None] | None = None) -> None:
        self.chained = chained
        self.events = 0
        self._lock = threading.Lock()
        self._answered = 0  # answers of the operator call in flight, not yet in con.stats()
        self._share = 0.0  # the largest share of an operator call answered in this SEU
        self._batches = -1  # the SEU boundary the share belongs to

    def __call__(self, event: Progress) -> None:
        with self._lock:
            self.events += 1
            self._answered = event.rows_done if event.rows_done < event.rows_total else 0
            if event.rows_total:
                self._share = max(self._share, event.rows_done / event.rows_total)
        if self.chained is not None:
            self.chained(event)

    def answered(self) -> int:
        """Requests answered in the operator call in flight (not yet in ``con.stats()``)."""
        with self._lock:
            return self._answered

    def rows(self, progress: Any) -> float:
        """Driving rows done: ``progress.rows_done`` (SEU boundaries) plus the share of the SEU
        in flight answered so far."""
        with self._lock:
            if progress.batches_done != self._batches:  # a new SEU: its share starts at 0
                self._batches = progress.batches_done
                self._share = 0.0
            share = self._share
        return float(progress.rows_done) + share * float(progress.rows_in_flight)


class PlanShare:
    """The share of a planned query's LLM work done, between SEU boundaries too.

    At each SEU boundary the runtime reports the estimated remaining cost (token-equivalents);
    the work done so far (the backend's tokens, counted as each backend batch answers, or the
    tokens asked when more were answered from the cache) plus that remaining cost is the
    expected total, and the share is the work done over it, so the share moves while an SEU's
    requests are answered rather than only when the SEU ends. It stays below 100% until the
    query has finished.
    """

    def __init__(self) -> None:
        self._batches = -1
        self._total = 0.0

    def update(self, progress: Any, work: float, rows: float | None = None) -> tuple[float, float]:
        """The share done and the estimated work left (token-equivalents); ``rows``: the
        driving rows done within the SEU in flight too (:meth:`LiveProgress.rows`)."""
        if progress.batches_done != self._batches:
            self._batches = progress.batches_done
            self._total = work + float(progress.estimated_remaining_cost)
        left = max(0.0, self._total - work)
        if progress.finished:
            return 1.0, 0.0
        share = work / self._total if self._total > 0 else float(progress.fraction)
        by_rows = float(progress.fraction)
        if rows is not None and progress.rows_total:
            by_rows = rows / progress.rows_total
        return min(max(share, by_rows), 0.99), left


def _work(stats: Any) -> float:
    """LLM work done so far in the cost model's token-equivalents."""
    weight = DEFAULTS.completion_weight
    physical = stats.physical_prompt_tokens + weight * stats.physical_completion_tokens
    asked = stats.prompt_tokens + weight * stats.completion_tokens
    return float(max(physical, asked))


def progress_line(
    con: SemConnection,
    *,
    elapsed: float | None = None,
    width: int = 0,
    share: PlanShare | None = None,
    live: LiveProgress | None = None,
) -> str:
    """One line of progress (cut to ``width`` characters when given); ``live``: the events of
    the SEU in flight, so rows and calls move after every backend batch."""
    stats = con.stats()
    parts = [] if elapsed is None else [f"{elapsed:,.0f} s"]
    planned = _plan_progress(con)
    if planned is not None:
        p = planned
        rows_done = live.rows(p) if live is not None else float(p.rows_done)
        done, left = (share or PlanShare()).update(p, _work(stats), rows_done)
        if p.finished:
            rows_done = float(p.rows_done)
        rows = f"{_short(int(rows_done))}/{_short(p.rows_total)}"
        parts.append(f"{done * 100:3.0f}% (rows {rows})")
    else:
        parts.append(_duckdb_share(con))
    answering = live.answered() if live is not None else 0
    parts.append(
        f"LLM {stats.llm_calls + answering:,} asked ({stats.physical_calls:,} run, "
        f"{stats.cache_hits:,} cached, {stats.fused + stats.deduplicated:,} shared)"
    )
    if planned is not None:
        parts.append(f"~{_short(left)} tokens left")
    line = "  ".join(parts)
    return line if not width or len(line) <= width else line[: width - 1] + "…"


def _duckdb_share(con: SemConnection) -> str:
    try:
        pct = float(con.duckdb.query_progress())
    except Exception:  # noqa: BLE001 - progress is best-effort
        pct = -1.0
    return f"{pct:3.0f}%" if pct >= 0 else "  …"


def _plan_progress(con: SemConnection) -> Any:
    """The SEU loop's progress of a planned query (None for other statements)."""
    try:
        p = con.semantic_progress()
    except Exception:  # noqa: BLE001 - progress is best-effort
        return None
    return p if getattr(p, "rows_total", 0) else None


def _short(value: float) -> str:
    """1234 -> '1.2k', 5_600_000 -> '5.6M': numbers that keep the line short."""
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if abs(value) >= size * 10:
            return f"{value / size:,.0f}{unit}"
        if abs(value) >= size:
            return f"{value / size:.1f}{unit}"
    return f"{value:,.0f}"
