"""The scheduler sidecar's ceiling: many concurrent client queries, replicas that are never the
bottleneck (issue 29, item 4).

A real ``duckdb-sem serve`` process with ``--replicas`` SIMULATED replicas (``sim:PROFILE``;
with ``time_scale=0`` a replica answers at once, so the sidecar alone limits throughput) is
driven by ``--procs`` client processes holding ``--queries`` concurrent client queries between
them. Each query sends SEUs of ``--rows`` filter requests (~300-token prompts, every row
distinct, cache off, so nothing is fused or cached) on a fixed schedule that offers the load
asked for (requests/s over all queries), for ``--seconds`` per load. Reported per offered load:
requests/s answered, P50/P99 SEU latency, the sidecar's CPU seconds per request (from
``/proc``), and the queue length it reports (``/v1/status``, sampled). Written to
``results/sidecar_load.md`` and ``.png``.

The clients share the machine with the sidecar, so on a small machine requests/s is a floor of
what the sidecar can do; CPU per request is the figure that carries over (one core's ceiling is
its inverse).

    python benchmarks/bench_sidecar_load.py                        # ~2 minutes
    python benchmarks/bench_sidecar_load.py --loads 1000 --seconds 3   # a quick look
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from _results import RESULTS

_FILLER = " ".join(["the critic found the pacing uneven but the lead performance strong"] * 22)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _client(url: str, queries: int, rows: int, period: float, seconds: float, tag: str,
            out: Any) -> None:  # fmt: skip
    """One client process: ``queries`` threads, each an SEU every ``period`` seconds."""
    from duckdb_sem.llm.prompts import build_request
    from duckdb_sem.llm.request import OperatorKind
    from duckdb_sem.scheduler.seu import SEU
    from duckdb_sem.scheduler.sidecar_client import SidecarClient

    client = SidecarClient(url, workers=queries)
    latencies: list[float] = []
    answered = [0]
    lock = threading.Lock()
    start = time.monotonic() + 0.5
    stop = start + seconds

    def query(q: int) -> None:
        k = 0
        due = start + period * q / queries  # spread the queries' phases
        while due < stop:
            time.sleep(max(0.0, due - time.monotonic()))
            reqs = tuple(
                build_request(
                    OperatorKind.FILTER, f"Is this review positive? {tag}-{q}-{k}-{j} " + _FILLER
                )
                for j in range(rows)
            )
            sent = time.monotonic()
            result = client.submit(SEU(f"{tag}-q{q}", "sem_filter", reqs, 1.0)).result()
            took = time.monotonic() - sent
            with lock:
                latencies.append(took)
                answered[0] += len(result.completions)
            k += 1
            due += period

    threads = [threading.Thread(target=query, args=(q,)) for q in range(queries)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    client.close()
    out.put({"latencies": latencies, "answered": answered[0], "start": start,
             "end": time.monotonic()})  # fmt: skip


def _level(url: str, pid: int, args: argparse.Namespace, load: float) -> dict[str, Any]:
    per_proc = args.queries // args.procs
    period = args.queries * args.rows / load  # each query's SEU interval
    queue: mp.Queue[dict[str, Any]] = mp.Queue()
    procs = [
        mp.Process(
            target=_client,
            args=(url, per_proc, args.rows, period, args.seconds, f"L{load:.0f}p{i}", queue),
        )
        for i in range(args.procs)
    ]
    cpu0 = _cpu_s(pid)
    for p in procs:
        p.start()
    queued: list[int] = []
    outs: list[dict[str, Any]] = []
    while len(outs) < len(procs):
        try:
            status = httpx.get(f"{url}/v1/status", timeout=2).json()
            queued.append(int(status.get("queued_requests", 0)))
        except (httpx.HTTPError, ValueError):
            pass
        while not queue.empty():
            outs.append(queue.get())
        time.sleep(0.25)
    # the clients' own window (CLOCK_MONOTONIC is one clock for every process), not their imports
    wall = max(o["end"] for o in outs) - min(o["start"] for o in outs)
    for p in procs:
        p.join()
    cpu = _cpu_s(pid) - cpu0
    lat = sorted(x for o in outs for x in o["latencies"])
    answered = sum(o["answered"] for o in outs)
    return {
        "offered": load,
        "answered_per_s": answered / max(wall, 1e-9),
        "p50_ms": 1000 * statistics.median(lat) if lat else float("nan"),
        "p99_ms": 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else float("nan"),
        "cpu_us_per_request": 1e6 * cpu / max(answered, 1),
        "max_queued": max(queued, default=0),
        "requests": answered,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replicas", type=int, default=8)
    parser.add_argument("--profile", default="qwen3-4b-a100")
    parser.add_argument("--time-scale", type=float, default=0.0)
    parser.add_argument(
        "--servers",
        action="store_true",
        help="each replica a sim-server process behind an openai: backend",
    )
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--rows", type=int, default=16, help="requests per SEU")
    parser.add_argument("--loads", type=float, nargs="+", default=[500, 1000, 2000, 4000, 8000])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--out", type=Path, default=RESULTS / "sidecar_load.md")
    args = parser.parse_args()
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    spec = f"sim:{args.profile}?time_scale={args.time_scale}"
    argv = [sys.executable, "-m", "duckdb_sem.cli.main", "serve", "--cache", "off",
            "--listen", f"127.0.0.1:{port}"]  # fmt: skip
    replicas: list[subprocess.Popen[bytes]] = []
    for _ in range(args.replicas):
        if args.servers:  # a SIMULATED OpenAI-compatible server per replica, as vLLM would be
            sim_port = _free_port()
            replicas.append(subprocess.Popen(
                [sys.executable, "-m", "duckdb_sem.cli.main", "sim-server", "--profile",
                 args.profile, "--time-scale", str(args.time_scale), "--listen",
                 f"127.0.0.1:{sim_port}"], stderr=subprocess.DEVNULL,
            ))  # fmt: skip
            _wait(f"http://127.0.0.1:{sim_port}/v1/models")
            argv += ["--backend", f"openai:http://127.0.0.1:{sim_port}/v1?concurrency=64"]
        else:
            argv += ["--backend", spec]
    server = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
    try:
        _wait(f"{url}/v1/health")
        rows = []
        for load in args.loads:
            row = _level(url, server.pid, args, load)
            print(json.dumps({k: round(v, 1) for k, v in row.items()}), flush=True)
            rows.append(row)
    finally:
        for proc in (server, *replicas):
            proc.terminate()
            proc.wait(10)
    _write(args, "openai: -> sim-server " + spec if args.servers else spec, rows)


def _wait(url: str) -> None:
    for _ in range(100):
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{url} did not answer")


def _write(args: argparse.Namespace, spec: str, rows: list[dict[str, Any]]) -> None:
    lines = [
        "# The scheduler sidecar under load (SIMULATED replicas)",
        "",
        f"One `duckdb-sem serve` with {args.replicas} x `{spec}` (SIMULATED; time_scale "
        f"{args.time_scale:g}; at 0 replicas answer at once, so the sidecar is the bottleneck), "
        f"{args.queries} concurrent client queries in {args.procs} client processes on the "
        f"same {os.cpu_count()}-CPU machine, SEUs of {args.rows} distinct ~300-token filter "
        f"requests, cache off, {args.seconds:.0f} s per offered load.",
        "",
        "| offered req/s | answered req/s | P50 ms | P99 ms | sidecar CPU us/request "
        "| max queued requests |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['offered']:.0f} | {r['answered_per_s']:.0f} | {r['p50_ms']:.1f} | "
            f"{r['p99_ms']:.1f} | {r['cpu_us_per_request']:.0f} | {r['max_queued']} |"
        )
    best = min(r["cpu_us_per_request"] for r in rows)
    lines += [
        "",
        f"One core's ceiling at the lowest CPU per request: {1e6 / best:,.0f} requests/s.",
        "",
        "Reproduce: `python benchmarks/bench_sidecar_load.py --loads "
        f"{' '.join(f'{x:.0f}' for x in args.loads)} --seconds {args.seconds:.0f}`",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    offered = [r["offered"] for r in rows]
    a.plot(offered, [r["answered_per_s"] for r in rows], "o-", label="answered")
    a.plot(offered, offered, "k--", label="offered")
    a.set_xlabel("offered requests/s")
    a.set_ylabel("requests/s")
    a.legend()
    b.plot(offered, [r["p50_ms"] for r in rows], "o-", label="P50")
    b.plot(offered, [r["p99_ms"] for r in rows], "s-", label="P99")
    b.set_xlabel("offered requests/s")
    b.set_ylabel("SEU latency (ms)")
    b.set_yscale("log")
    b.legend()
    fig.suptitle("Scheduler sidecar under load (SIMULATED replicas)")
    fig.tight_layout()
    fig.savefig(args.out.with_suffix(".png"), dpi=100)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
