"""``bench_replicas``'s results file: ``results/<out>.csv`` and ``results/<out>.md``."""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _replicas_workload import EXAMPLES, TENANTS
from _results import RESULTS

from duckdb_sem.backends.sim.profiles import get_profile

__all__ = ["write"]

Capacity = Callable[[list[dict[str, Any]], str, int, str, float], float]
_COLUMNS = ("load", "rate_qps", "p50", "p99", "throughput", "hit_rate", "gpu_util")


def read(paths: list[str], out: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Virtual rows from ``paths`` (CSV files of earlier runs) and real-time rows from
    ``results/<out>_real.csv`` when it exists, with their numbers parsed back."""
    rows = [r for p in paths for r in _load(Path(p))]
    real_csv = RESULTS / f"{out}_real.csv"
    return rows, _load(real_csv) if real_csv.exists() else []


def _load(path: Path) -> list[dict[str, Any]]:
    with open(path, newline="") as f:
        return [_parsed(r) for r in csv.DictReader(f)]


def _parsed(row: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in row.items():
        try:
            out[key] = int(value) if value.lstrip("-").isdigit() else float(value)
        except ValueError:
            out[key] = value
    return out


def _save(rows: list[dict[str, Any]], name: str) -> None:
    with open(RESULTS / name, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def save_real(real: list[dict[str, Any]], out: str) -> None:
    """The real-time rows of a ``--real-only`` run."""
    RESULTS.mkdir(exist_ok=True)
    _save(real, f"{out}_real.csv")
    cmd = " ".join(["python benchmarks/bench_replicas.py", *sys.argv[1:]])
    (RESULTS / f"{out}_real.cmd").write_text(cmd + "\n")


def write(
    rows: list[dict[str, Any]],
    real: list[dict[str, Any]],
    args: argparse.Namespace,
    capacity_at: Capacity,
) -> None:
    RESULTS.mkdir(exist_ok=True)
    cmd = " ".join(["python benchmarks/bench_replicas.py", *sys.argv[1:]])
    if args.report_from:  # the commands of the runs whose rows these are
        runs = [Path(p).with_suffix(".cmd") for p in args.report_from]
        runs.append(RESULTS / f"{args.out}_real.cmd")
        cmd = "`; `".join([cmd] + [r.read_text().strip() for r in runs if r.exists()])
    else:
        _save(rows, f"{args.out}.csv")
        (RESULTS / f"{args.out}.cmd").write_text(cmd + "\n")
        if real:
            _save(real, f"{args.out}_real.csv")
    budget = get_profile(args.profile).kv_cache_tokens
    few = [r for r in rows if r["workload"] == "few-shot"]
    kv = max((int(r["prefix_kv_tokens"]) for r in few), default=0)
    pool = max((int(r["pool_kv_tokens"]) for r in few), default=0)
    lines = [
        f"# N replicas: least-loaded, prefix-affinity and vllm-router (SIMULATED, {args.profile})",
        "",
        f"Commands: `{cmd}`. SIMULATED throughout: a vLLM-like cost model, not a GPU; each "
        f"replica's KV cache is {budget:,} tokens in 16-token blocks with vLLM's automatic "
        "prefix caching (chained block hashes of the whole prompt, LRU eviction of freed "
        "blocks: `duckdb_sem/backends/sim/blocks.py`). Virtual-clock figures are exact for the "
        "model; the real-time table is not quiet (shared machine).",
        "",
        "Workloads (`benchmarks/_replicas_workload.py`): **as-written** is the query set's "
        "Static-1 traces (the prefix is duckdb-sem's generic instruction: a handful of short "
        f"prefixes in all); **few-shot** gives each arriving query one of {TENANTS} tenants' "
        f"own {EXAMPLES} few-shot examples per call (`examples :=`, part of the prefix). "
        f"The {TENANTS} x 9 queries' distinct few-shot prefixes hold {pool:,} tokens of KV, "
        f"those of one run's arrivals {kv:,}, against {budget:,} per replica.",
    ]
    for workload in args.workloads:
        mine = [r for r in rows if r["workload"] == workload]
        if mine:
            lines += _section(mine, workload, args, capacity_at)
    if real:
        lines += _real(real, args)
    (RESULTS / f"{args.out}.md").write_text("\n".join(lines) + "\n")


def _section(
    rows: list[dict[str, Any]], workload: str, args: argparse.Namespace, capacity_at: Capacity
) -> list[str]:
    lines = [
        "",
        f"## {workload}: virtual clock, {args.queries} Poisson arrivals per point",
        "",
        "| replicas | placement | load | rate (q/s) | P50 (s) | P99 (s) | throughput (q/s) | "
        "prefix hit rate | GPU util |",
        "|---" * 9 + "|",
    ]
    lines += [
        f"| {r['replicas']} | {r['placement']} | " + " | ".join(str(r[c]) for c in _COLUMNS) + " |"
        for r in rows
    ]
    base = min(r["p50"] for r in rows if r["replicas"] == min(args.replicas))
    lines += [
        "",
        "Throughput at equal P50 (highest offered rate whose P50 is within the SLO), scaling "
        "efficiency per replica (capacity at N / (N x capacity at 1 replica)), and the prefix "
        "hit rate (mean over the sweep's loads):",
        "",
        "| P50 SLO (s) | replicas | least-loaded (q/s) | prefix-affinity (q/s) | "
        "affinity / least-loaded | efficiency least-loaded | efficiency prefix-affinity | "
        "hit rate least-loaded | hit rate prefix-affinity |",
        "|---" * 9 + "|",
    ]
    for slo in (round(base * 1.25, 2), round(base * 2, 2)):
        one = capacity_at(rows, workload, 1, "least-loaded", slo) if 1 in args.replicas else 0
        for n in args.replicas:
            caps = [
                capacity_at(rows, workload, n, p, slo) for p in ("least-loaded", "prefix-affinity")
            ]
            top = max(r["rate_qps"] for r in rows if r["replicas"] == n)
            mark = ["≥" if c >= top else "" for c in caps]  # the SLO held at every point
            ratio = f"{caps[1] / caps[0]:.2f}x" if caps[0] else "n/a"
            eff = [
                f"{m}{c / (n * one):.2f}" if one else "n/a" for m, c in zip(mark, caps, strict=True)
            ]
            hits = [_hit(rows, n, p) for p in ("least-loaded", "prefix-affinity")]
            lines.append(
                f"| {slo} | {n} | {mark[0]}{caps[0]:.3f} | {mark[1]}{caps[1]:.3f} | {ratio} | "
                f"{eff[0]} | {eff[1]} | {hits[0]} | {hits[1]} |"
            )
    lines += ["", "≥: P50 stayed within the SLO at every offered load of the sweep (censored).", ""]
    lines += _saturated(rows, args)
    return lines


def _saturated(rows: list[dict[str, Any]], args: argparse.Namespace) -> list[str]:
    """Achieved throughput and P99 at the sweep's highest load, and the scaling efficiency
    they give (throughput at N / (N x throughput at 1 replica)): never censored."""
    top = max(r["load"] for r in rows)
    at = {(r["replicas"], r["placement"]): r for r in rows if r["load"] == top}
    one = at.get((1, "least-loaded"))
    lines = [
        f"At the highest offered load ({top}x each N's capacity): achieved throughput, its scaling "
        "efficiency per replica, and P99:",
        "",
        "| replicas | throughput least-loaded | throughput prefix-affinity | efficiency least-loaded "
        "| efficiency prefix-affinity | P99 least-loaded (s) | P99 prefix-affinity (s) |",
        "|---" * 7 + "|",
    ]
    for n in args.replicas:
        mine = [at.get((n, p)) or (at.get((n, "least-loaded")) if n == 1 else None)
                for p in ("least-loaded", "prefix-affinity")]  # fmt: skip
        if None in mine or one is None:
            continue
        thr = [r["throughput"] for r in mine if r is not None]
        eff = [f"{t / (n * one['throughput']):.2f}" for t in thr]
        p99 = [r["p99"] for r in mine if r is not None]
        lines.append(f"| {n} | {thr[0]} | {thr[1]} | {eff[0]} | {eff[1]} | {p99[0]} | {p99[1]} |")
    return lines


def _hit(rows: list[dict[str, Any]], n: int, placement: str) -> str:
    mine = [
        r["hit_rate"]
        for r in rows
        if r["replicas"] == n and (n == 1 or r["placement"] == placement)
    ]
    return f"{statistics.fmean(mine):.3f}" if mine else "n/a"


def _real(real: list[dict[str, Any]], args: argparse.Namespace) -> list[str]:
    lines = [
        "",
        f"## Real time, not quiet (shared machine): {args.real_workload}, {args.real_queries} "
        f"queries at once, sim servers at time_scale {args.time_scale}",
        "",
        "N `duckdb-sem sim-server` processes; `vllm-router` is started by the benchmark in front "
        "of them (`--policy cache_aware`, and `round_robin` as a control; its defaults otherwise) and our scheduler sees it as "
        "one `openai:` backend. The hit rate is the servers' own `/metrics`.",
        "",
        "| replicas | placement | makespan (s) | throughput (q/s) | P50 (s) | P99 (s) | "
        "prefix hit rate (servers' /metrics) |",
        "|---" * 7 + "|",
    ]
    lines += [
        f"| {r['replicas']} | {r['placement']} | {r['makespan']} | {r['throughput']} | "
        f"{r['p50']} | {r['p99']} | {r['hit_rate']} |"
        for r in real
    ]
    return lines
