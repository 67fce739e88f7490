"""Several processes on one machine running the embedded default at once (issue 29, item 1).

Each process is a fresh Python with its own database and no result cache, running one query on
``llama:`` (the bundled models) over the bundled reviews: a 35-row filter, a 35-row rating on a
1-5 scale, or a 12-row five-word gist (generation). For N = 1, 2, 4 processes the harness runs
them one after the other (sequential: the sum of their times) and all at once (concurrent: the
time until the last one finishes), with CPU turns on (``llama:``, the default: one row's
evaluation at a time on the machine, ``backends/cpu_turns.py``) and off
(``llama:?share_cpu=off``, every process's threads on every core, as before). The figure is
concurrent / sequential: 1.0 means running them together costs nothing over one after the
other; the target is <= 1.2. Memory: peak RSS and USS (the pages only that process holds) of
each process, sampled from ``/proc``; the model weights are memory-mapped, so they count in
every RSS but in no USS.

Time it alone: anything else running on the machine changes both sides.

    python benchmarks/bench_processes.py                 # N = 1, 2, 4; ~10 minutes on 2 cores
    python benchmarks/bench_processes.py --counts 2 --workloads filter   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from _results import RESULTS, write_report

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

_CHILD = """
import json, sys, time
start = time.perf_counter()
import duckdb_sem
spec, rows, sql, data = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
con = duckdb_sem.connect(backend=spec, cache="off")
con.execute(f"CREATE TABLE r AS SELECT * FROM read_csv('{data}') ORDER BY review_id LIMIT {rows}")
began = time.perf_counter()
value = con.execute(sql).fetchall()[0][0]
done = time.perf_counter()
print(json.dumps({"query_s": done - began, "total_s": done - start, "value": str(value)}))
"""


@dataclass(frozen=True)
class Run:
    wall_s: float  # sequential: the sum of the processes' times; concurrent: until the last ends
    query_s: list[float]
    peak_rss_mib: float  # the largest of the processes
    peak_uss_mib: float
    values: list[str]


def _memory_kib(pid: int) -> tuple[int, int]:
    """(RSS, USS) of ``pid`` in KiB, from /proc (0, 0 once it has exited)."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0, 0
    fields = {}
    for line in text.splitlines()[1:]:
        name, _, rest = line.partition(":")
        fields[name.strip()] = int(rest.split()[0])
    return fields.get("Rss", 0), fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)


def _run(spec: str, workload: str, count: int, together: bool) -> Run:
    rows, sql = WORKLOADS[workload]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-c", _CHILD, spec, str(rows), sql, str(DATA)]
    outputs: list[dict[str, object]] = []
    rss = uss = 0
    wall = 0.0
    batches = [list(range(count))] if together else [[i] for i in range(count)]
    for batch in batches:
        start = time.perf_counter()
        procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, env=env, text=True) for _ in batch]
        while any(p.poll() is None for p in procs):
            for p in procs:
                r, u = _memory_kib(p.pid)
                rss, uss = max(rss, r), max(uss, u)
            time.sleep(0.2)
        wall += time.perf_counter() - start
        for p in procs:
            out, _ = p.communicate()
            if p.returncode != 0:
                raise SystemExit(f"a {workload} process failed ({p.returncode})")
            outputs.append(json.loads(out.strip().splitlines()[-1]))
    return Run(
        wall_s=wall,
        query_s=[float(str(o["query_s"])) for o in outputs],
        peak_rss_mib=rss / 1024,
        peak_uss_mib=uss / 1024,
        values=[str(o["value"]) for o in outputs],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument("--out", type=Path, default=RESULTS / "processes.md")
    args = parser.parse_args()
    lines = [
        "# Processes sharing one machine: the embedded default, CPU turns on and off",
        "",
        f"{os.cpu_count()} CPUs. Each process: fresh Python, own database, no result cache. "
        "sequential = the processes one after the other (sum of wall times, model load "
        "included); concurrent = all at once (until the last one ends). Ratio = concurrent / "
        "sequential (target <= 1.2). RSS counts the memory-mapped weights in every process; "
        "USS is what each process alone holds.",
        "",
        "| workload | N | turns | sequential s | concurrent s | ratio | query s (concurrent) "
        "| peak RSS MiB | peak USS MiB | same answers |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for workload in args.workloads:
        for count in args.counts:
            for spec, label in (("llama:", "on"), ("llama:?share_cpu=off", "off")):
                if count == 1 and label == "off":
                    continue  # one process: turns change nothing
                seq = _run(spec, workload, count, together=False)
                conc = _run(spec, workload, count, together=True)
                same = len(set(seq.values + conc.values)) == 1
                row = (
                    f"| {workload} | {count} | {label} | {seq.wall_s:.1f} | {conc.wall_s:.1f} | "
                    f"{conc.wall_s / seq.wall_s:.2f} | "
                    f"{min(conc.query_s):.1f}-{max(conc.query_s):.1f} | "
                    f"{conc.peak_rss_mib:.0f} | {conc.peak_uss_mib:.0f} | {same} |"
                )
                print(row, flush=True)
                lines.append(row)
    write_report(
        args.out,
        lines,
        "python benchmarks/bench_processes.py "
        f"--counts {' '.join(map(str, args.counts))} --workloads {' '.join(args.workloads)}",
    )


if __name__ == "__main__":
    main()
