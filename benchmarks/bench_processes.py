"""Several processes on one machine running the embedded default at once (issue 29, item 1).

Each process is a fresh Python with its own database and no result cache, running one query on
``llama:`` (the bundled models) over the bundled reviews: a 35-row filter, a 35-row rating on a
1-5 scale, or a 12-row five-word gist (generation). For N = 1, 2, 4 processes the harness runs
them one after the other (sequential: the sum of their times) and all at once (concurrent: the
time until the last one finishes), with CPU turns on (``llama:``, the default: one row's
evaluation at a time on the machine, ``backends/cpu_turns.py``) and off
(``llama:?share_cpu=off``, every process's threads on every core, as before). The figure is
concurrent / sequential: 1.0 means running them together costs nothing over one after the
other; the target is <= 1.2. ``--modes`` picks what runs: ``turns`` (CPU turns on), ``off``
(turns off) and ``shared`` (``DUCKDB_SEM_SCHEDULER=local``: the processes share one local
sidecar that holds the one model, ``scheduler/local.py``; no sidecar runs before a run, so its
first process starts one, model load included, and it is stopped after the run). Memory, sampled from ``/proc`` every 0.2 s: the peak USS (pages only that process
holds) and PSS (its pages, shared ones divided among their sharers) of each client process,
the sidecar's peak USS, and the peak of the sum of every process's PSS (the machine's memory
for the run: sidecar included). The model weights are memory-mapped, so they count in every
RSS but in no USS.

Time it alone: anything else running on the machine changes both sides.

    python benchmarks/bench_processes.py                 # N = 1, 2, 4; ~10 minutes on 2 cores
    python benchmarks/bench_processes.py --counts 2 --workloads filter   # a quick look
    python benchmarks/bench_processes.py --counts 1 2 --workloads filter --modes turns shared
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from _results import RESULTS, write_report

from duckdb_sem.scheduler.local_paths import local_paths

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "duckdb_sem" / "data" / "rt_reviews.csv"

WORKLOADS: dict[str, tuple[int, str]] = {
    "filter": (35, "SELECT count(*) FROM r WHERE sem_filter('Is this review positive? {text}')"),
    "rating": (
        35,
        "SELECT avg(CAST(sem_map('Rate how much the critic liked the movie on a 1 to 5 scale "
        "(1 = hated it, 5 = loved it). Answer with the digit only. Review: {text}') AS INTEGER)) "
        "FROM r",
    ),
    "gist": (12, "SELECT count(sem_map('Summarize the review in five words: {text}')) FROM r"),
}

#: mode -> the backend spec its processes use and whether they share the local sidecar
MODES: dict[str, tuple[str, bool]] = {
    "turns": ("llama:", False),
    "off": ("llama:?share_cpu=off", False),
    "shared": ("llama:", True),
}

_CHILD = """
import json, sys, time
start = time.perf_counter()
import duckdb_sem
spec, rows, sql, data = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
offset = int(sys.argv[5])
con = duckdb_sem.connect(backend=spec, cache="off")
con.execute(f"CREATE TABLE r AS SELECT * FROM read_csv('{data}') ORDER BY review_id "
            f"LIMIT {rows} OFFSET {offset}")
began = time.perf_counter()
value = con.execute(sql).fetchall()[0][0]
done = time.perf_counter()
print(json.dumps({"query_s": done - began, "total_s": done - start, "value": str(value)}))
"""


@dataclass(frozen=True)
class Run:
    wall_s: float  # sequential: the sum of the processes' times; concurrent: until the last ends
    query_s: list[float]
    client_uss_mib: float  # the largest peak of one client process
    client_pss_mib: float
    server_uss_mib: float  # the local sidecar's peak (0 without one)
    total_pss_mib: float  # the peak of the sum over every process, sidecar included
    values: list[str]


def _memory_kib(pid: int) -> tuple[int, int]:
    """(USS, PSS) of ``pid`` in KiB, from /proc (0, 0 once it has exited)."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0, 0
    fields = {}
    for line in text.splitlines()[1:]:
        name, _, rest = line.partition(":")
        fields[name.strip()] = int(rest.split()[0])
    uss = fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)
    return uss, fields.get("Pss", 0)


def _sidecars(socket: Path | None) -> list[int]:
    """The local sidecars (``duckdb-sem serve``) listening on ``socket``."""
    if socket is None:
        return []
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0") if entry.name.isdigit() else []
        except OSError:
            continue
        if b"serve" in cmdline and any(str(socket).encode() in arg for arg in cmdline):
            pids.append(int(entry.name))
    return pids


def _stop_sidecars(socket: Path) -> None:
    for pid in _sidecars(socket):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while _sidecars(socket) and time.monotonic() < deadline:
        time.sleep(0.1)


@contextmanager
def _local_sidecar(spec: str, shared: bool) -> Iterator[Path | None]:
    """A shared run's sidecar socket (the user's real one: the sidecar takes CPU turns with
    every other model process, as in use), with no sidecar before the run and none after."""
    if not shared:
        yield None
        return
    socket = local_paths(spec, None, retry_failures=False).socket
    _stop_sidecars(socket)
    try:
        yield socket
    finally:
        _stop_sidecars(socket)


def _run(mode: str, workload: str, count: int, together: bool, *, distinct: bool) -> Run:
    spec, shared = MODES[mode]
    rows, sql = WORKLOADS[workload]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUCKDB_SEM_")}
    env["PYTHONPATH"] = str(ROOT)
    argv = [sys.executable, "-c", _CHILD, spec, str(rows), sql, str(DATA)]
    # distinct: process i reads rows i*rows.. so that no two processes ask the same request
    # (a shared sidecar would otherwise fuse them and run each once)
    offsets = [i * rows if distinct else 0 for i in range(count)]
    outputs: list[dict[str, object]] = []
    client_uss = client_pss = server_uss = total_pss = 0
    wall = 0.0
    batches = [list(range(count))] if together else [[i] for i in range(count)]
    with _local_sidecar(spec, shared) as socket:
        # turns and off keep each process's own model (the embedded default is the local sidecar)
        env["DUCKDB_SEM_SCHEDULER"] = "local" if socket is not None else "inprocess"
        for batch in batches:
            start = time.perf_counter()
            procs = [
                subprocess.Popen(
                    [*argv, str(offsets[i])], stdout=subprocess.PIPE, env=env, text=True
                )
                for i in batch
            ]
            while any(p.poll() is None for p in procs):
                total = 0
                for p in procs:
                    uss, pss = _memory_kib(p.pid)
                    client_uss, client_pss = max(client_uss, uss), max(client_pss, pss)
                    total += pss
                for pid in _sidecars(socket):
                    uss, pss = _memory_kib(pid)
                    server_uss = max(server_uss, uss)
                    total += pss
                total_pss = max(total_pss, total)
                time.sleep(0.2)
            wall += time.perf_counter() - start
            for p in procs:
                out, _ = p.communicate()
                if p.returncode != 0:
                    raise SystemExit(f"a {workload} process ({mode}) failed ({p.returncode})")
                outputs.append(json.loads(out.strip().splitlines()[-1]))
    return Run(
        wall_s=wall,
        query_s=[float(str(o["query_s"])) for o in outputs],
        client_uss_mib=client_uss / 1024,
        client_pss_mib=client_pss / 1024,
        server_uss_mib=server_uss / 1024,
        total_pss_mib=total_pss / 1024,
        values=[str(o["value"]) for o in outputs],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument(
        "--distinct", action="store_true", help="each process its own rows: nothing to fuse"
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "processes.md")
    args = parser.parse_args()
    lines = [
        "# Processes sharing one machine: the embedded default, CPU turns, one shared sidecar",
        "",
        f"{os.cpu_count()} CPUs. Each process: fresh Python, own database, no result cache. "
        "sequential = the processes one after the other (sum of wall times, model load "
        "included); concurrent = all at once (until the last one ends). Ratio = concurrent / "
        "sequential (target <= 1.2). Modes: turns = CPU turns on (the default), off = turns "
        "off, shared = DUCKDB_SEM_SCHEDULER=local (one sidecar holds the model; fresh per run). "
        "USS is what one process alone holds, PSS its share of what it maps; total PSS is the "
        "peak of the sum over every process of the run, the sidecar included."
        + (
            " Distinct: each process reads its own rows (nothing to fuse)." if args.distinct else ""
        ),
        "",
        "| workload | N | mode | sequential s | concurrent s | ratio | query s (concurrent) "
        "| client USS MiB | client PSS MiB | sidecar USS MiB | total PSS MiB | same answers |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for workload in args.workloads:
        for count in args.counts:
            for mode in args.modes:
                if count == 1 and mode == "off":
                    continue  # one process: turns change nothing
                seq = _run(mode, workload, count, together=False, distinct=args.distinct)
                conc = _run(mode, workload, count, together=True, distinct=args.distinct)
                same = sorted(seq.values) == sorted(conc.values)
                row = (
                    f"| {workload} | {count} | {mode} | {seq.wall_s:.1f} | {conc.wall_s:.1f} | "
                    f"{conc.wall_s / seq.wall_s:.2f} | "
                    f"{min(conc.query_s):.1f}-{max(conc.query_s):.1f} | "
                    f"{conc.client_uss_mib:.0f} | {conc.client_pss_mib:.0f} | "
                    f"{conc.server_uss_mib:.0f} | {conc.total_pss_mib:.0f} | {same} |"
                )
                print(row, flush=True)
                lines.append(row)
    write_report(
        args.out,
        lines,
        "python benchmarks/bench_processes.py "
        f"--counts {' '.join(map(str, args.counts))} --workloads {' '.join(args.workloads)} "
        f"--modes {' '.join(args.modes)}" + (" --distinct" if args.distinct else ""),
    )


if __name__ == "__main__":
    main()
