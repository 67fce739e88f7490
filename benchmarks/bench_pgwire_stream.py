"""Benchmark (information, not a gate): the wire server's memory while results stream.

A real ``duckdb-sem pgwire`` process (``--backend test:``, no LLM work) answers
``SELECT i, repeat('x', 1000) FROM range(N)`` (about 1 kB a row) to one client at a time, for
results of ``--sizes-mb`` (10, 100, 1000 MB by default): read through the extended protocol by
psycopg's ``stream()`` (one row at a time) and through the simple protocol by a bare socket
reading 64 kB at a time, each at full speed and slowly (``--pause-ms`` after every MB read).
A thread samples the server's RSS (``/proc/PID/status`` ``VmRSS``) every 10 ms; a streamed
result keeps peak - idle flat whatever the size or the client's speed. Memory is the figure;
times are printed too, from a shared machine (not a timing). Writes
``results/pgwire_stream.{md,png}``.

    python benchmarks/bench_pgwire_stream.py [--sizes-mb 10 100 1000 --pause-ms 20]
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import psycopg
from _results import RESULTS

ROW_BYTES = 1000


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


class Sampler:
    """The largest RSS of ``pid`` since :meth:`reset`, sampled on a thread."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def reset(self) -> None:
        self.peak = rss_mb(self.pid)

    def _loop(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, rss_mb(self.pid))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@dataclass(frozen=True)
class Case:
    size_mb: int
    protocol: str  # "extended" (psycopg stream) or "simple" (bare socket)
    slow: bool
    idle: float
    peak: float
    rows: int
    first_s: float
    total_s: float


def _query(size_mb: int) -> str:
    rows = size_mb * 1_000_000 // ROW_BYTES
    return f"SELECT i, repeat('x', {ROW_BYTES}) AS pad FROM range({rows}) t(i)"


def read_extended(dsn: str, sql: str, pause: float) -> tuple[int, float]:
    """Rows read and seconds to the first row, through psycopg's single-row ``stream()``."""
    first = 0.0
    n = 0
    per_mb = 1_000_000 // ROW_BYTES
    with psycopg.connect(dsn, autocommit=True) as conn:
        started = time.perf_counter()
        for _ in conn.cursor().stream(sql):
            n += 1
            if n == 1:
                first = time.perf_counter() - started
            if pause and n % per_mb == 0:
                time.sleep(pause)
    return n, first


def _startup(port: int, database: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    body = struct.pack("!i", 196608) + b"user\0bench\0database\0" + database.encode() + b"\0\0"
    sock.sendall(struct.pack("!i", len(body) + 4) + body)
    return sock


def read_simple(port: int, database: str, sql: str, pause: float) -> tuple[int, float]:
    """The same through the simple protocol: a Query, then 64 kB socket reads, messages
    counted as they complete (``pause`` after each MB)."""
    sock = _startup(port, database)
    buf = b""
    ready = 0
    rows = 0
    first = 0.0
    started = 0.0
    since_pause = 0
    while ready < 2:  # the startup's ReadyForQuery, then the query's
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("the server closed the connection")
        buf += chunk
        since_pause += len(chunk)
        while len(buf) >= 5:
            (length,) = struct.unpack("!i", buf[1:5])
            if len(buf) < 1 + length:
                break
            kind, buf = buf[:1], buf[1 + length :]
            if kind == b"D":
                rows += 1
                if rows == 1:
                    first = time.perf_counter() - started
            elif kind == b"E":
                raise RuntimeError("the query failed")
            elif kind == b"Z":
                ready += 1
                if ready == 1:
                    started = time.perf_counter()
                    sock.sendall(b"Q" + struct.pack("!i", len(sql) + 5) + sql.encode() + b"\0")
        if pause and since_pause >= 1_000_000:
            since_pause = 0
            time.sleep(pause)
    sock.close()
    return rows, first


def start_server(db: Path) -> tuple[subprocess.Popen[bytes], int]:
    server = subprocess.Popen(
        [sys.executable, "-c", "from duckdb_sem.cli.main import main; main()", "pgwire",
         "--db", str(db), "--listen", "127.0.0.1:0", "--backend", "test:", "--cache", "off"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ.copy(),
    )  # fmt: skip
    assert server.stderr is not None
    port = 0
    while not port:  # "duckdb-sem pgwire: listening on 127.0.0.1:PORT (database ...)"
        line = server.stderr.readline().decode(errors="replace")
        if not line:
            raise RuntimeError(f"pgwire exited with {server.wait()} before listening")
        found = re.search(r"listening on [^ ]*:(\d+) ", line)
        port = int(found.group(1)) if found else 0
    stderr = server.stderr
    threading.Thread(target=lambda: stderr.read(), daemon=True).start()  # never blocks it
    return server, port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--pause-ms", type=float, default=20.0, help="slow: after each MB")
    parser.add_argument("--out", default="pgwire_stream")
    args = parser.parse_args()
    db = Path(tempfile.mkdtemp()) / "stream.duckdb"
    duckdb.connect(str(db)).close()
    server, port = start_server(db)
    dsn = f"host=127.0.0.1 port={port} user=bench dbname={db.stem}"
    cases: list[Case] = []
    try:
        time.sleep(0.5)
        at_start = rss_mb(server.pid)
        sampler = Sampler(server.pid)
        read_extended(dsn, _query(1), 0)  # warm: imports, DuckDB's first Arrow stream
        read_simple(port, db.stem, _query(1), 0)
        for size in args.sizes_mb:
            for protocol in ("extended", "simple"):
                for slow in (False, True):
                    time.sleep(0.3)
                    idle = rss_mb(server.pid)
                    sampler.reset()
                    pause = args.pause_ms / 1000 if slow else 0.0
                    started = time.perf_counter()
                    if protocol == "extended":
                        rows, first = read_extended(dsn, _query(size), pause)
                    else:
                        rows, first = read_simple(port, db.stem, _query(size), pause)
                    total = time.perf_counter() - started
                    case = Case(size, protocol, slow, idle, sampler.peak, rows, first, total)
                    cases.append(case)
                    print(f"{size:>5} MB {protocol:<8} {'slow' if slow else 'full':<4} "
                          f"idle {idle:6.0f} MB  peak {case.peak:6.0f} MB  "
                          f"+{case.peak - idle:5.0f} MB  {total:6.1f} s", flush=True)  # fmt: skip
        sampler.stop()
        alive = server.poll() is None
    finally:
        server.terminate()
        server.wait(10)
    write(cases, args, alive=alive, at_start=at_start)


def write(cases: list[Case], args: argparse.Namespace, *, alive: bool, at_start: float) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    lines = [
        "# Wire results stream with bounded memory",
        "",
        "One `duckdb-sem pgwire` process (`--backend test:`), one client at a time reading "
        f"`SELECT i, repeat('x', {ROW_BYTES}) FROM range(N)` (about 1 kB a row): the extended "
        "protocol through psycopg's `stream()`, the simple protocol through a bare socket "
        f"reading 64 kB at a time; slow = {args.pause_ms:g} ms pause after each MB read. "
        "Server RSS sampled every 10 ms from `/proc/PID/status`. Command: "
        f"`python benchmarks/bench_pgwire_stream.py --sizes-mb {' '.join(map(str, args.sizes_mb))}`.",
        "",
        "| result (MB) | protocol | client | rows | idle RSS (MB) | peak RSS (MB) | "
        "peak - idle (MB) | first row (s) | total (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cases:
        lines.append(
            f"| {c.size_mb:,} | {c.protocol} | {'slow' if c.slow else 'full speed'} | "
            f"{c.rows:,} | {c.idle:.0f} | {c.peak:.0f} | {c.peak - c.idle:.0f} | "
            f"{c.first_s:.3f} | {c.total_s:.1f} |"
        )
    worst = max((c.peak - c.idle for c in cases), default=0.0)
    lines += [
        "",
        f"Largest peak - idle: {worst:.0f} MB (bound: 100 MB, docs/pgwire.md). Server alive at "
        f"the end: {'yes' if alive else 'NO'}. Times: machine shared, not a timing.",
        "",
        f"Idle is measured before each case, after the cases before it; the server used "
        f"{at_start:.0f} MB when it started. Idle creeps up a little with each new connection "
        "(each session is a thread, and glibc gives threads their own malloc arenas, which "
        "keep what they freed; with `MALLOC_ARENA_MAX=2` it stays flat), not with result size.",
    ]
    (RESULTS / f"{args.out}.md").write_text("\n".join(lines) + "\n")
    plot(cases, RESULTS / f"{args.out}.png")


def plot(cases: list[Case], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for protocol in ("extended", "simple"):
        for slow in (False, True):
            picked = [c for c in cases if c.protocol == protocol and c.slow == slow]
            ax.plot([c.size_mb for c in picked], [c.peak - c.idle for c in picked], marker="o",
                    label=f"{protocol}, {'slow' if slow else 'full speed'}")  # fmt: skip
    ax.axhline(100, color="grey", linestyle="--", label="bound (100 MB)")
    ax.set_xscale("log")
    ax.set_xlabel("result size (MB)")
    ax.set_ylabel("server peak RSS - idle (MB)")
    ax.set_title("pgwire: server memory while a result streams")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
