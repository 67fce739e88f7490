"""Load (a gate in tests/reliability/test_load.py): many connections, several processes, faults.

``--processes`` client processes with ``--connections`` threads each (one duckdb-sem connection
per thread) run a mix of semantic queries (filter, typed map, join, count) through one scheduler
sidecar in front of the SIMULATED backend, which injects transient HTTP 503 faults into
``--fault-rate`` of its calls (retried by the transport policy). Every result is compared with a
serial, fault-free run of the same query; the RSS of every process is sampled. Reports
throughput, latency P50/P99, peak RSS per process and RSS growth after warm-up.

Warm-up is counted in work, not seconds: each connection first runs every kind of query once; a
process is warm when all its connections have, and then runs ``--seconds`` more. (The first
quarter of the run by the clock was the warm-up on a quiet machine, but a loaded one was still
making connections then, and their first plans read as growth.) The sidecar is warm when every
client process is.

    python benchmarks/bench_reliability_load.py --processes 4 --connections 16 --seconds 180

SIMULATED: answers come from the sim backend's seeded oracle, not a model.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ORACLE = "sim:default?selectivity=0.3&output_words=4"
ROWS = 600
WINDOW = 40
#: the longest a warm-up may take (seconds) before the run goes on without it
WARMUP_BOUND_S = 300.0
CATEGORIES = ["cooking", "sports", "music", "travel"]
SETUP = [
    "SET threads TO 1",
    f"CREATE TABLE t AS SELECT i AS id, 'review ' || i::VARCHAR || ': ' || "
    f"['great food', 'dull match', 'loud band', 'long trip', 'fine meal'][i % 5 + 1] AS text "
    f"FROM range({ROWS}) r(i)",
    "CREATE TABLE c AS SELECT * FROM (SELECT unnest($1) AS name)",
]
QUERIES = {
    "filter": "SELECT id FROM t WHERE id >= {a} AND id < {b} "
    "AND sem_filter('{{text}} is positive') ORDER BY id",
    "map": "SELECT id, sem_map('Stars for {{text}}', 'INTEGER') AS s FROM t "
    "WHERE id >= {a} AND id < {b} ORDER BY id",
    "join": "SELECT t.id, c.name FROM t JOIN c ON sem_join('{{t.text}} is about {{c.name}}') "
    "WHERE t.id >= {a} AND t.id < {a} + 8 ORDER BY 1, 2",
    "count": "SELECT count(*) FROM t WHERE id >= {a} AND id < {b} "
    "AND sem_filter('{{text}} mentions food')",
}


def query_for(key: str) -> str:
    kind, a = key.split(":")
    return QUERIES[kind].format(a=int(a), b=int(a) + WINDOW)


def digest(rows: list[tuple[Any, ...]]) -> str:
    return hashlib.sha256(repr(rows).encode()).hexdigest()[:16]


def rss_mb(pid: int | str = "self") -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _connect(**kwargs: Any) -> Any:
    import duckdb_sem

    con = duckdb_sem.connect(**kwargs)
    con.execute(SETUP[0])
    con.execute(SETUP[1])
    con.execute(SETUP[2], [CATEGORIES])
    return con


# -- worker process -----------------------------------------------------------------------------
def worker(url: str, connections: int, seconds: float, seed: int, out: str) -> None:
    started = time.monotonic()
    # ``seconds`` after the warm-up; a warm-up that never ends is cut at a bound
    deadline = [started + WARMUP_BOUND_S + seconds]
    warm_at: list[float] = []  # when every connection had run each kind of query once
    results: list[tuple[str, str, float]] = []
    errors: list[str] = []
    rss: list[tuple[float, float]] = []  # (time.monotonic(), MB): one clock for all processes
    lock = threading.Lock()
    cold = [connections]

    def warmed() -> None:
        with lock:
            cold[0] -= 1
            if cold[0] == 0:
                warm_at.append(time.monotonic())
                deadline[0] = warm_at[0] + seconds

    def run(k: int) -> None:
        rnd = random.Random(seed * 1000 + k)
        try:
            con = _connect(backend="test:", cache="off", scheduler=url)
        except Exception as err:  # noqa: BLE001 - reported to the parent
            errors.append(f"connect: {err!r}")
            warmed()  # it never will be: the others' warm-up must not wait for it
            return
        first = list(QUERIES)  # the warm-up: each kind once
        counted = False
        while first or time.monotonic() < deadline[0]:
            kind = first.pop(0) if first else rnd.choice(list(QUERIES))
            key = f"{kind}:{rnd.randrange(0, ROWS - WINDOW, 8)}"
            t0 = time.monotonic()
            try:
                rows = con.sql(query_for(key)).fetchall()
            except Exception as err:  # noqa: BLE001 - reported to the parent
                with lock:
                    errors.append(f"{key}: {type(err).__name__}: {err}")
            else:
                with lock:
                    results.append((key, digest(rows), time.monotonic() - t0))
            if not first and not counted:
                counted = True
                warmed()
        con.close()

    threads = [threading.Thread(target=run, args=(k,)) for k in range(connections)]
    for th in threads:
        th.start()
    while any(th.is_alive() for th in threads):
        rss.append((time.monotonic(), rss_mb()))
        time.sleep(1.0)
    for th in threads:
        th.join()
    # a file, not stdout: a pipe the parent reads only at the end would fill up and block us
    Path(out).write_text(json.dumps({"results": results, "errors": errors[:20],
                                     "n_errors": len(errors), "rss": rss,
                                     "warm_at": warm_at[0] if warm_at else None}))  # fmt: skip


# -- the parent ---------------------------------------------------------------------------------
@dataclass
class LoadReport:
    processes: int
    connections: int
    seconds: float
    backend: str
    queries: int = 0
    distinct: int = 0
    mismatches: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    rss: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    warm_at: dict[str, float | None] = field(default_factory=dict)  # time.monotonic(), None: never
    usage: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0

    def growth(self, name: str) -> tuple[float, float, float]:
        """(RSS once warm, RSS at the end, peak) of one process, in MB."""
        series = self.rss[name]
        warm = self.warm_at.get(name)
        after_warmup = [mb for t, mb in series if warm is not None and t >= warm]
        after_warmup = after_warmup or [series[-1][1]]
        return after_warmup[0], series[-1][1], max(mb for _, mb in series)

    def cold(self) -> list[str]:
        """The processes that never finished their warm-up (within ``WARMUP_BOUND_S``)."""
        return [name for name in self.rss if self.warm_at.get(name) is None]

    def markdown(self, command: str) -> str:
        lines = [
            "# Reliability under load (SIMULATED backend)",
            "",
            "Information, gated in `tests/reliability/test_load.py` with smaller parameters.",
            f"Measured with `{command}` on the shared 2-core development machine.",
            "",
            f"- {self.processes} client processes x {self.connections} connections = "
            f"{self.processes * self.connections} concurrent connections, "
            f"{self.seconds:g} s after warm-up, "
            "one `duckdb-sem serve` sidecar",
            f"- backend `{self.backend}` (transient HTTP 503 faults injected, retried)",
            f"- queries: {self.queries} ({self.distinct} distinct), "
            f"{self.queries / self.wall_s:.1f} queries/s; latency P50 "
            f"{self.percentile(0.5) * 1000:.0f} ms, P99 {self.percentile(0.99) * 1000:.0f} ms",
            f"- results equal to a serial fault-free run: "
            f"{'all' if not self.mismatches else 'NOT all'} ({len(self.mismatches)} mismatches); "
            f"errors: {len(self.errors)}",
            f"- sidecar usage: {self.usage}",
            "",
            "| process | RSS after warm-up (MB) | RSS at end (MB) | peak RSS (MB) |",
            "|---|---|---|---|",
        ]
        for name in self.rss:
            warm, end, peak = self.growth(name)
            lines.append(f"| {name} | {warm:.0f} | {end:.0f} | {peak:.0f} |")
        return "\n".join(lines) + "\n"


def run_load(
    *,
    processes: int = 4,
    connections: int = 16,
    seconds: float = 180.0,
    fault_rate: float = 0.02,
    time_scale: float = 0.001,
) -> LoadReport:
    backend = (
        f"{ORACLE}&time_scale={time_scale:g}&fault=503&fail_rate={fault_rate:g}"
        "&retries=6&retry_backoff=0.01"
    )
    report = LoadReport(processes, connections, seconds, backend)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUCKDB_SEM_")}
    tmp = Path(tempfile.mkdtemp(prefix="sem-load-"))
    serve = [sys.executable, "-c", "from duckdb_sem.cli.main import main; main()", "serve",
             "--backend", backend, "--listen", "127.0.0.1:0", "--cache", str(tmp / "c.sqlite")]  # fmt: skip
    sidecar = subprocess.Popen(serve, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               text=True, env=env)  # fmt: skip
    drain: threading.Thread | None = None
    try:
        assert sidecar.stderr is not None
        url = ""
        while not url:
            line = sidecar.stderr.readline()
            if not line:
                raise RuntimeError(f"the sidecar exited with {sidecar.wait()}")
            if "listening on " in line:
                url = line.split("listening on ", 1)[1].split()[0]
        drain = threading.Thread(target=sidecar.stderr.read, daemon=True)  # its log
        drain.start()
        started = time.monotonic()
        logs = [(tmp / f"client{p}.log").open("wb") for p in range(processes)]
        clients = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--worker",
                    url,
                    str(connections),
                    str(seconds),
                    str(p),
                    str(tmp / f"client{p}.json"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=logs[p],
                env=env,
            )
            for p in range(processes)
        ]
        side_rss: list[tuple[float, float]] = []
        while any(c.poll() is None for c in clients):
            side_rss.append((time.monotonic(), rss_mb(sidecar.pid)))
            time.sleep(1.0)
        for c, log in zip(clients, logs, strict=True):
            c.wait()
            log.close()
        report.wall_s = time.monotonic() - started
        import httpx

        report.usage = httpx.get(f"{url}/v1/status", timeout=10).json()["usage"]
        report.rss["sidecar"] = side_rss or [(0.0, 0.0)]
    finally:
        sidecar.terminate()
        sidecar.wait(timeout=30)
        if drain is not None:
            drain.join(timeout=10)
        if sidecar.stderr is not None:
            sidecar.stderr.close()
    seen: dict[str, set[str]] = {}
    for p in range(processes):
        result = tmp / f"client{p}.json"
        if not result.exists():
            err = (tmp / f"client{p}.log").read_text(errors="replace")
            report.errors.append(f"client {p} died: {err[-500:]}")
            continue
        data = json.loads(result.read_text())
        report.errors += data["errors"][: max(0, 20 - len(report.errors))]
        if data["n_errors"]:
            report.errors.append(f"client {p}: {data['n_errors']} errors")
        report.rss[f"client {p}"] = [tuple(x) for x in data["rss"]] or [(0.0, 0.0)]
        report.warm_at[f"client {p}"] = data["warm_at"]
        for key, dig, latency in data["results"]:
            seen.setdefault(key, set()).add(dig)
            report.latencies.append(latency)
    clients = [report.warm_at.get(f"client {p}") for p in range(processes)]
    report.warm_at["sidecar"] = None if None in clients else max(c or 0.0 for c in clients)
    report.queries = len(report.latencies)
    report.distinct = len(seen)
    serial = _connect(backend=ORACLE, cache="off")  # in process, no faults, one at a time
    for key, digests in sorted(seen.items()):
        expected = digest(serial.sql(query_for(key)).fetchall())
        if digests != {expected}:
            report.mismatches.append(key)
    serial.close()
    return report


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        url, connections, seconds, seed, out = sys.argv[2:7]
        worker(url, int(connections), float(seconds), int(seed), out)
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--connections", type=int, default=16, help="per process")
    parser.add_argument("--seconds", type=float, default=180.0)
    parser.add_argument("--fault-rate", type=float, default=0.02)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results/reliability_load.md"))
    args = parser.parse_args()
    report = run_load(
        processes=args.processes,
        connections=args.connections,
        seconds=args.seconds,
        fault_rate=args.fault_rate,
    )
    command = (
        f"python benchmarks/bench_reliability_load.py --processes {args.processes} "
        f"--connections {args.connections} --seconds {args.seconds:g} "
        f"--fault-rate {args.fault_rate:g}"
    )
    text = report.markdown(command)
    Path(args.out).write_text(text)
    print(text)
    if report.errors:
        print("errors:", *report.errors, sep="\n  ")
    print(f"median latency {statistics.median(report.latencies or [0]):.3f} s")


if __name__ == "__main__":
    main()
