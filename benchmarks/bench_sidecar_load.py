"""The scheduler sidecar's ceiling: many concurrent client queries, replicas that are never the
bottleneck (issue 29, item 4).

A real ``duckdb-sem serve`` process with ``--replicas`` SIMULATED replicas (``sim:PROFILE``;
with ``time_scale=0`` a replica answers at once, so the sidecar alone limits throughput) is
driven by ``--procs`` client processes holding ``--queries`` concurrent client queries between
them. Each query sends SEUs of ``--rows`` filter requests (~300-token prompts, every row
distinct, cache off, so nothing is fused or cached) on a fixed schedule that offers the load
asked for (requests/s over all queries), for ``--seconds`` per load. Reported per offered load:
requests/s answered, P50/P99 SEU latency as the clients see it and as spent inside the sidecar
(``/v1/latency``: request read to answer written, so with replicas that answer at once, what the
sidecar adds), the sidecar's CPU seconds per request (from ``/proc``), and the queue length it
reports (``/v1/status``, sampled). Written to
``results/sidecar_load.md`` and ``.png``.

The clients share the machine with the sidecar, so on a small machine requests/s is a floor of
what the sidecar can do; CPU per request is the figure that carries over (one core's ceiling is
its inverse).

``--baseline DIR`` also runs a second sidecar (and its clients) from the ``duckdb_sem`` source
tree in DIR, say the commit before a change (``git archive COMMIT duckdb_sem | tar -x -C
DIR``), taking turns with this tree at every offered load, so before and after are measured
in one run under the same machine state.

    python benchmarks/bench_sidecar_load.py                        # ~2 minutes
    python benchmarks/bench_sidecar_load.py --loads 1000 --seconds 3   # a quick look
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from _results import RESULTS
from _servers import free_port, wait_http

_FILLER = " ".join(["the critic found the pacing uneven but the lead performance strong"] * 22)


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _client(url: str, queries: int, rows: int, period: float, seconds: float, tag: str,
            out: Any, tree: str | None) -> None:  # fmt: skip
    """One client process: ``queries`` threads, each an SEU every ``period`` seconds."""
    if tree:  # the clients of a baseline sidecar are of its release too
        sys.path.insert(0, tree)
    from duckdb_sem.errors import SemError
    from duckdb_sem.llm.prompts import build_request
    from duckdb_sem.llm.request import OperatorKind
    from duckdb_sem.scheduler.seu import SEU
    from duckdb_sem.scheduler.sidecar_client import SidecarClient

    client = SidecarClient(url, workers=queries)
    latencies: list[float] = []
    answered = [0]
    failed: list[str] = []  # one line per failed SEU: an overloaded sidecar may give up on some
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
            try:
                result = client.submit(SEU(f"{tag}-q{q}", "sem_filter", reqs, 1.0)).result()
            except SemError as err:  # counted and reported, not a crash of the client thread
                with lock:
                    failed.append(f"{type(err).__name__}: {str(err)[:160]}")
                k += 1
                due += period
                continue
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
             "end": time.monotonic(), "failed": failed})  # fmt: skip


def _level(
    url: str, pid: int, args: argparse.Namespace, load: float, tree: str | None
) -> dict[str, Any]:
    per_proc = args.queries // args.procs
    period = args.queries * args.rows / load  # each query's SEU interval
    queue: mp.Queue[dict[str, Any]] = mp.Queue()
    procs = [
        mp.Process(
            target=_client,
            args=(
                url,
                per_proc,
                args.rows,
                period,
                args.seconds,
                f"L{load:.0f}p{i}{tree}",
                queue,
                tree,
            ),
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
        time.sleep(1.0)  # a status of 1,000 queries costs the sidecar CPU: not too often
    # the clients' own window (CLOCK_MONOTONIC is one clock for every process), not their imports
    wall = max(o["end"] for o in outs) - min(o["start"] for o in outs)
    for p in procs:
        p.join()
    cpu = _cpu_s(pid) - cpu0
    lat = sorted(x for o in outs for x in o["latencies"])
    answered = sum(o["answered"] for o in outs)
    failed = [line for o in outs for line in o.get("failed", [])]
    if failed:
        print(f"{len(failed)} SEU(s) failed, e.g. {failed[0]}", file=sys.stderr, flush=True)
    inside = _inside(url, min(o["start"] for o in outs))
    return {
        "offered": load,
        "answered_per_s": answered / max(wall, 1e-9),
        "p50_ms": 1000 * statistics.median(lat) if lat else float("nan"),
        "p99_ms": 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else float("nan"),
        "inside_p50_ms": inside.get("p50_ms", float("nan")),
        "inside_p99_ms": inside.get("p99_ms", float("nan")),
        "cpu_us_per_request": 1e6 * cpu / max(answered, 1),
        "max_queued": max(queued, default=0),
        "requests": answered,
        "failed_seus": len(failed),
    }


def _inside(url: str, since: float) -> dict[str, float]:
    """The sidecar's own time per SEU in this level's window (``GET /v1/latency``; a baseline
    tree from before it existed answers 404: NaN)."""
    try:
        reply = httpx.get(f"{url}/v1/latency", params={"since": since}, timeout=5)
    except httpx.HTTPError:
        return {}
    return dict(reply.json()) if reply.status_code == 200 else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replicas", type=int, default=8)
    parser.add_argument("--profile", default="qwen3-4b-a100")
    parser.add_argument("--time-scale", type=float, default=0.0)
    parser.add_argument(
        "--spec",
        help="each replica this backend instead of sim:PROFILE, e.g. 'test:' (rule-based "
        "answers, no engine simulated: the sidecar's own cost without the simulator's)",
    )
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
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a duckdb_sem source tree to compare with, load by load (see the docstring)",
    )
    parser.add_argument(
        "--where",
        action="store_true",
        help="instead: profile where the sidecar's CPU goes at the first load "
        "(writes results/sidecar_profile.md)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "sidecar_load.md")
    args = parser.parse_args()
    spec = args.spec or f"sim:{args.profile}?time_scale={args.time_scale}"
    if args.where:
        _where(args, spec)
        return
    builds: list[tuple[str, str | None]] = [("this tree", None)]
    if args.baseline is not None:
        if not (args.baseline / "duckdb_sem" / "__init__.py").is_file():
            raise SystemExit(f"--baseline {args.baseline}: no duckdb_sem/__init__.py in it")
        builds.insert(0, ("baseline", str(args.baseline.resolve())))
    procs: list[subprocess.Popen[bytes]] = []
    servers: dict[str, tuple[str, int]] = {}
    try:
        for label, tree in builds:
            url, pid = _start(args, spec, tree, procs)
            servers[label] = (url, pid)
        rows = []
        for i, load in enumerate(args.loads):
            turns = builds if i % 2 == 0 else builds[::-1]  # alternate: drift hits both alike
            for label, tree in turns:
                url, pid = servers[label]
                row = {"build": label, **_level(url, pid, args, load, tree)}
                print(json.dumps({k: v if isinstance(v, str) else round(v, 1)
                                  for k, v in row.items()}), flush=True)  # fmt: skip
                rows.append(row)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(10)
    _write(args, "openai: -> sim-server " + spec if args.servers else spec, rows)


def _where(args: argparse.Namespace, spec: str) -> None:
    """Profile an in-process sidecar at the first offered load (:mod:`_sidecar_profile`)."""
    from _sidecar_profile import profiled_sidecar, shares

    server, profiles = profiled_sidecar(spec, args.replicas)
    load = args.loads[0]
    row = _level(server.url, os.getpid(), args, load, None)
    print(json.dumps({k: round(v, 1) for k, v in row.items()}), flush=True)
    out = args.out.with_name("sidecar_profile.md")
    lines = [
        f"# Where the scheduler sidecar's CPU goes ({_kind(spec)} replicas)",
        "",
        f"`bench_sidecar_load.py --where`: an in-process sidecar with {args.replicas} x `{spec}` "
        f"({_kind(spec)}), {args.queries} client queries in {args.procs} processes, SEUs of "
        f"{args.rows} distinct ~300-token filter requests, {load:.0f} requests/s offered for "
        f"{args.seconds:.0f} s ({row['answered_per_s']:.0f}/s answered). Shares of the CPU of "
        "the event loop's thread and the executor threads, each on its own CPU clock (cProfile with "
        "time.thread_time; the SIMULATED engines' stepping threads not included). Profiling "
        "slows every call, so read the shares, not absolute times.",
        "",
        "| part | share of profiled CPU |",
        "|---|---|",
        *(f"| {label} | {100 * share:.0f}% |" for label, share in shares(profiles)),
        "",
        "Reproduce: `python benchmarks/bench_sidecar_load.py --where --loads "
        f"{load:.0f} --seconds {args.seconds:.0f}"
        + (f" --spec {args.spec}" if args.spec else "")
        + "`",
        "",
    ]
    out.write_text("\n".join(lines))
    print(f"wrote {out}")
    os._exit(0)  # the in-process sidecar's threads: nothing to wait for


def _start(
    args: argparse.Namespace, spec: str, tree: str | None, procs: list[subprocess.Popen[bytes]]
) -> tuple[str, int]:
    """Start one sidecar (from ``tree``'s sources when given) and its replicas; its URL, pid."""
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = tree
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "duckdb_sem.cli.main", "serve", "--cache", "off",
            "--listen", f"127.0.0.1:{port}"]  # fmt: skip
    for _ in range(args.replicas):
        if args.servers:  # a SIMULATED OpenAI-compatible server per replica, as vLLM would be
            sim_port = free_port()
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "duckdb_sem.cli.main", "sim-server", "--profile",
                 args.profile, "--time-scale", str(args.time_scale), "--listen",
                 f"127.0.0.1:{sim_port}"], stderr=subprocess.DEVNULL, env=env, cwd=tree,
            ))  # fmt: skip
            wait_http(f"http://127.0.0.1:{sim_port}/v1/models")
            argv += ["--backend", f"openai:http://127.0.0.1:{sim_port}/v1?concurrency=64"]
        else:
            argv += ["--backend", spec]
    server = subprocess.Popen(argv, stderr=subprocess.DEVNULL, env=env, cwd=tree)
    procs.append(server)
    wait_http(f"{url}/v1/health")
    return url, server.pid


def _kind(spec: str) -> str:
    """What the replicas are, for titles: SIMULATED engines, or rule-based answers."""
    return "SIMULATED" if "sim:" in spec else "rule-based, no engine simulated"


def _write(args: argparse.Namespace, spec: str, rows: list[dict[str, Any]]) -> None:
    builds = list(dict.fromkeys(r["build"] for r in rows))
    lines = [
        f"# The scheduler sidecar under load ({_kind(spec)} replicas)",
        "",
        f"One `duckdb-sem serve` with {args.replicas} x `{spec}` ({_kind(spec)}; "
        + (
            "each replica a `duckdb-sem sim-server` process of its own, reached over HTTP by "
            "an `openai:` backend, as vLLM servers would be; "
            if args.servers
            else ""
        )
        + (
            f"time_scale {args.time_scale:g}; at 0 replicas answer at once, "
            if "sim:" in spec
            else "they answer at once, "
        )
        + "so the sidecar is the bottleneck), "
        f"{args.queries} concurrent client queries in {args.procs} client processes on the "
        f"same {os.cpu_count()}-CPU machine, SEUs of {args.rows} distinct ~300-token filter "
        f"requests, cache off, {args.seconds:.0f} s per offered load"
        + (", this tree and the baseline taking turns at each load." if len(builds) > 1 else "."),
        "",
        "| build | offered req/s | answered req/s | P50 ms | P99 ms | in sidecar P50 ms "
        "| in sidecar P99 ms | sidecar CPU us/request | max queued requests | failed SEUs |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (builds.index(r["build"]), r["offered"])):
        lines.append(
            f"| {r['build']} | {r['offered']:.0f} | {r['answered_per_s']:.0f} | "
            f"{r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['inside_p50_ms']:.2f} | "
            f"{r['inside_p99_ms']:.2f} | {r['cpu_us_per_request']:.0f} | "
            f"{r['max_queued']} | {r.get('failed_seus', 0)} |"
        )
    lines.append("")
    for build in builds:
        mine = [r for r in rows if r["build"] == build]
        best = min(r["cpu_us_per_request"] for r in mine)
        lines.append(
            f"{build}: one core's ceiling at the lowest CPU per request ({best:.0f} us): "
            f"{1e6 / best:,.0f} requests/s; most answered {max(r['answered_per_s'] for r in mine):,.0f}/s."
        )
    lines += [
        "",
        "Reproduce: `python benchmarks/bench_sidecar_load.py --loads "
        f"{' '.join(f'{x:.0f}' for x in args.loads)} --seconds {args.seconds:.0f}"
        + (f" --spec {args.spec}" if args.spec else "")
        + (" --servers" if args.servers else "")
        + (" --baseline DIR" if len(builds) > 1 else "")
        + "`",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    _plot(args.out.with_suffix(".png"), spec, rows)
    print(f"wrote {args.out}")


def _plot(out: Path, spec: str, rows: list[dict[str, Any]]) -> None:
    """Answered requests/s, latency and sidecar CPU against offered load, per build."""
    builds = list(dict.fromkeys(r["build"] for r in rows))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b, c) = plt.subplots(1, 3, figsize=(14, 4))
    for build in builds:
        mine = [r for r in rows if r["build"] == build]
        offered = [r["offered"] for r in mine]
        a.plot(offered, [r["answered_per_s"] for r in mine], "o-", label=f"{build}: answered")
        b.plot(offered, [r["p50_ms"] for r in mine], "o-", label=f"{build}: P50")
        b.plot(offered, [r["p99_ms"] for r in mine], "s--", label=f"{build}: P99")
        c.plot(offered, [r["cpu_us_per_request"] for r in mine], "o-", label=build)
    offered = sorted({r["offered"] for r in rows})
    a.plot(offered, offered, "k:", label="offered")
    a.set_xlabel("offered requests/s")
    a.set_ylabel("requests/s")
    a.legend()
    b.set_xlabel("offered requests/s")
    b.set_ylabel("SEU latency (ms)")
    b.set_yscale("log")
    b.legend(fontsize=7)
    c.set_xlabel("offered requests/s")
    c.set_ylabel("sidecar CPU us / request")
    c.set_ylim(bottom=0)
    c.legend()
    fig.suptitle(f"Scheduler sidecar under load ({_kind(spec)} replicas)")
    fig.tight_layout()
    fig.savefig(out, dpi=100)


if __name__ == "__main__":
    main()
