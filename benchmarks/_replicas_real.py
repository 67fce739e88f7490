"""Real-time part of ``bench_replicas``: N sim-server processes, with or without vllm-router.

Each configuration gets fresh servers (cold prefix caches): ``least-loaded`` and
``prefix-affinity`` give our scheduler N ``openai:`` backends; ``vllm-router`` gives it one
``openai:`` backend pointing at ``vllm-router`` (``cache_aware``; ``round_robin`` as a control) in
front of the N servers.
A burst of queries (the smaller traces of the set) is replayed at once, each query's SEUs in
order; the hit rate is read from the servers' own ``/metrics``. Machine shared: not a timing.
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from contextlib import ExitStack
from typing import Any

from _replicas_workload import TENANTS, FewShot
from workloads.runner import Step

from duckdb_sem.backends.registry import create_backend
from duckdb_sem.scheduler.admission import ReplicaLimits
from duckdb_sem.scheduler.core import Scheduler
from duckdb_sem.scheduler.seu import SEU

__all__ = ["run_all"]

PROFILE = "qwen3-32b-h200"
SMALL = 700  # requests: traces up to this size make the real-time burst
#: vllm-router in front of the servers: its cache-aware policy, and round robin as a control
#: (same router process and proxy path, no policy work: what the policy itself costs)
ROUTER_POLICIES = {"vllm-router": "cache_aware", "vllm-router round_robin": "round_robin"}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(url: str, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer within {timeout}s")


def _start(stack: ExitStack, cmd: list[str], health: str, log: str | None = None) -> None:
    out = open(log, "w") if log else subprocess.DEVNULL  # noqa: SIM115 (closed below)
    if log:
        stack.callback(out.close)  # type: ignore[union-attr]
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    stack.callback(_stop, proc)
    _wait(health, proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def _metric(base: str, name: str) -> float:
    with urllib.request.urlopen(f"{base}/metrics", timeout=5) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(name):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def _duckdb_sem() -> list[str]:
    """The ``duckdb-sem`` command (its script, else this interpreter running the CLI)."""
    found = shutil.which("duckdb-sem")
    return [found] if found else [sys.executable, "-m", "duckdb_sem.cli.main"]


def run_config(
    traces: list[list[Step]],
    *,
    replicas: int,
    placement: str,
    scale: float,
    profile: str = PROFILE,
    router_log: str | None = None,
    router_log_level: str = "warning",
) -> dict[str, Any]:
    with ExitStack() as stack:
        bases = []
        for _ in range(replicas):
            port = _port()
            base = f"http://127.0.0.1:{port}"
            cmd = [*_duckdb_sem(), "sim-server", "--profile", profile, "--listen",
                   f"127.0.0.1:{port}", "--time-scale", str(scale)]  # fmt: skip
            _start(stack, cmd, f"{base}/health")
            bases.append(base)
        concurrency = 64
        router_policy = ROUTER_POLICIES.get(placement)
        if router_policy is not None:
            port = _port()
            router = shutil.which("vllm-router")
            if router is None:
                raise SystemExit(
                    "vllm-router is not installed: pip install vllm-router==0.1.17 "
                    "(or pip install -e '.[bench]'), or run with --real-queries 0"
                )
            cmd = [router, "--host", "127.0.0.1", "--port", str(port), "--policy", router_policy,
                   "--worker-urls", *bases, "--log-level", router_log_level]  # fmt: skip
            # /readiness: every worker registered and healthy (/health is the process alone)
            _start(stack, cmd, f"http://127.0.0.1:{port}/readiness", log=router_log)
            specs = [f"openai:http://127.0.0.1:{port}/v1?concurrency={concurrency * replicas}"]
        else:
            specs = [f"openai:{b}/v1?concurrency={concurrency}" for b in bases]
        backends = [create_backend(s) for s in specs]
        for b in backends:
            stack.callback(b.close)
            # An openai: backend's identity includes its server URL, so the scheduler refuses
            # N of them as replicas of one model; these servers do serve one (SIMULATED) model.
            b.answers = backends[0].answers  # type: ignore[attr-defined]
        limits = None
        if router_policy is not None:
            # one backend standing for N servers: as many dispatches in flight as N backends get
            # (``duckdb-sem serve --max-inflight-dispatches``), else only two SEUs run at once
            limits = [ReplicaLimits(2 * replicas, 2 * concurrency * replicas)]
        sched = Scheduler(
            backends,
            policy="srtf",
            placement="least-loaded" if router_policy is not None else placement,
            fusion=False,
            limits=limits,
        )
        stack.callback(sched.close)
        latencies: list[float] = []
        lock = threading.Lock()

        def one(i: int, trace: list[Step]) -> None:
            started = time.monotonic()
            steps = [s for s in trace if s.requests]
            for k, step in enumerate(steps):
                remaining = float(sum(len(s.requests) for s in steps[k:]))
                sched.submit(SEU(f"q{i}", "bench", step.requests, remaining, "bench")).result()
            with lock:
                latencies.append(time.monotonic() - started)

        t0 = time.monotonic()
        threads = [threading.Thread(target=one, args=(i, t)) for i, t in enumerate(traces)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        makespan = time.monotonic() - t0
        hits = sum(_metric(b, "vllm:prefix_cache_hits_total") for b in bases)
        queried = sum(_metric(b, "vllm:prefix_cache_queries_total") for b in bases)
        # each server's SIMULATED busy time: how evenly the placement spread the work
        busy = [_metric(b, "duckdb_sem_sim_virtual_seconds") for b in bases]
    lat = sorted(latencies)
    return {
        "replicas": replicas,
        "placement": placement,
        "makespan": round(makespan, 2),
        "throughput": round(len(lat) / makespan, 3),
        "p50": round(statistics.median(lat), 2),
        "p99": round(lat[min(len(lat) - 1, math.ceil(0.99 * len(lat)) - 1)], 2),
        "hit_rate": round(hits / queried, 4) if queried else 0.0,
        "busy_max_s": round(max(busy), 2),
        "busy_mean_s": round(statistics.fmean(busy), 2),
    }


def run_all(
    tr: dict[str, list[Step]], few: FewShot | None, args: argparse.Namespace
) -> list[dict[str, Any]]:
    small = sorted(n for n, t in tr.items() if sum(len(s.requests) for s in t) <= SMALL)
    rnd = random.Random(args.seed)
    names = [rnd.choice(small) for _ in range(args.real_queries)]
    if few is None:
        traces = [tr[n] for n in names]
    else:
        traces = [few.trace(rnd.randrange(TENANTS), n) for n in names]
    rows = []
    for replicas in args.replicas:
        configs = ["least-loaded"]
        if replicas > 1:
            configs += ["prefix-affinity", *ROUTER_POLICIES]
        for placement in configs:
            row = run_config(traces, replicas=replicas, placement=placement,
                             scale=args.time_scale, profile=args.profile)  # fmt: skip
            print(f"REAL TIME N={replicas} {placement:15s} {row}", flush=True)
            rows.append(row)
    return rows
