"""Benchmark (information): duckdb-sem and LOTUS side by side, same queries, same backend.

Both systems talk HTTP to the same OpenAI-compatible server, started as its own process:

- ``--server sim`` (default): the SIMULATED Qwen3-32B (8x A100 TP=8) answering from the
  labels (``workloads/serve.py``), with ``--time-scale 1`` so wall time is (simulated) GPU
  time plus each client's real overhead;
- ``--server llama``: llama-cpp-python's server with the embedded SmolLM2-135M (a small *real*
  run: accuracy is the model's; use ``--limit`` to keep it short).

duckdb-sem runs each query adaptively through ``openai:`` (its estimator a SIMULATED Qwen3-4B
at the same time scale, so its time counts); LOTUS runs the same query written as a pandas
program in ``.venv-lotus`` (``lotus_side.py``), operators in the same order as the SQL.
Compared: end-to-end time, LLM requests and tokens (counted by the server), F1 against the
labels. Writes ``results/lotus[_llama].{md,csv}``.

    python benchmarks/bench_lotus.py [--queries Q0 Q1 ...] [--time-scale 1.0]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _results import RESULTS
from workloads.oracle import WorkloadOracle
from workloads.queries import Query, by_name
from workloads.runner import accuracy, load_tables, truth_rows
from workloads.sim_profiles import ESTIMATOR_PROFILE

import duckdb_sem
from duckdb_sem.backends.sim import SimBackend
from duckdb_sem.errors import SemError
from duckdb_sem.runtime import RuntimeOptions

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LOTUS_PY = ROOT / ".venv-lotus" / "bin" / "python"
# Everything but the local server goes to a proxy that does not exist: nothing leaves.
OFFLINE = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
           "NO_PROXY": "127.0.0.1,localhost", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}  # fmt: skip


class Server:
    """The shared backend as a child process; ``stats()`` reads its counters (sim only)."""

    def __init__(self, kind: str, time_scale: float, profile: str) -> None:
        self.kind = kind
        env = {**os.environ, **OFFLINE}
        if kind == "sim":
            cmd = [sys.executable, str(HERE / "workloads" / "serve.py"), "--profile", profile,
                   "--time-scale", str(time_scale)]  # fmt: skip
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         text=True, env=env)  # fmt: skip
            assert self.proc.stdout is not None
            _, self.base_url, self.model = self.proc.stdout.readline().split()
        else:
            from duckdb_sem.backends.llama import default_model_path

            port = _free_port()
            cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(default_model_path()),
                   "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--logits_all", "true",
                   "--n_threads", "2", "--model_alias", "smollm2"]  # fmt: skip
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, env=env)  # fmt: skip
            _wait_http(f"http://127.0.0.1:{port}/v1/models")
            # llama.cpp's server keeps no counters: a counting proxy in front of it does.
            self.proxy = CountingProxy(f"http://127.0.0.1:{port}")
            self.base_url, self.model = f"{self.proxy.url}/v1", "smollm2"

    def stats(self) -> dict[str, float]:
        if self.kind != "sim":
            return self.proxy.stats()
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("stats\n")
        self.proc.stdin.flush()
        return dict(json.loads(self.proc.stdout.readline()))

    def close(self) -> None:
        if self.kind != "sim":
            self.proxy.close()
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.terminate()
        self.proc.wait(timeout=30)


class CountingProxy:
    """Forwards HTTP to ``upstream`` and counts completion requests and their usage tokens."""

    def __init__(self, upstream: str) -> None:
        import http.server
        import threading

        import httpx

        self.counts = {"finished": 0.0, "prefill_tokens": 0.0, "decode_tokens": 0.0}
        lock = threading.Lock()
        client = httpx.Client(base_url=upstream, timeout=600.0)
        counts = self.counts

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def _forward(self, method: str) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size) if size else None
                headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
                resp = client.request(method, self.path, content=body, headers=headers)
                if method == "POST" and self.path.rstrip("/").endswith("completions"):
                    usage = (resp.json().get("usage") or {}) if resp.status_code == 200 else {}
                    with lock:
                        counts["finished"] += 1
                        counts["prefill_tokens"] += usage.get("prompt_tokens", 0)
                        counts["decode_tokens"] += usage.get("completion_tokens", 0)
                self.send_response(resp.status_code)
                self.send_header("Content-Type", resp.headers.get("content-type", "text/plain"))
                self.send_header("Content-Length", str(len(resp.content)))
                self.end_headers()
                self.wfile.write(resp.content)

            def do_GET(self) -> None:
                self._forward("GET")

            def do_POST(self) -> None:
                self._forward("POST")

            def log_message(self, *args: Any) -> None:
                pass

        self._lock = lock
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stats(self) -> dict[str, float]:
        with self._lock:
            return dict(self.counts)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_http(url: str, timeout: float = 120.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"server at {url} did not start")


def _delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before.get(k, 0) for k in after}


def run_ours(q: Query, server: Server, time_scale: float) -> dict[str, Any]:
    spec = f"openai:{server.base_url}?model={server.model}&concurrency=128"
    con = duckdb_sem.connect(backend=spec, cache="off", batch_size=128)
    load_tables(con.duckdb, q.tables)
    estimator = None
    if server.kind == "sim":
        estimator = SimBackend(ESTIMATOR_PROFILE, oracle=WorkloadOracle(noise=0.1),
                               time_scale=time_scale, spec="sim:estimator")  # fmt: skip
    con.runtime = RuntimeOptions(mode="adaptive", batch_rows=128, estimator=estimator)
    before = server.stats()
    started = time.perf_counter()
    error, got = "", set()
    try:
        rel = con.sql(q.sql)
        rows = rel.fetchall()
        cols = [rel.columns.index(k) for k in q.key]
        got = {tuple(str(r[i]) for i in cols) for r in rows}
    except SemError as err:  # recorded like a LOTUS failure, the other queries still run
        error = f"{type(err).__name__}: {err}"
        print(f"duckdb-sem {q.name} failed: {error}", file=sys.stderr, flush=True)
    wall = time.perf_counter() - started
    stats = con.stats()
    con.close()
    return {"wall_s": wall, "got": got, "server": _delta(server.stats(), before),
            "client_calls": stats.physical_calls, "error": error}  # fmt: skip


def run_lotus(qs: list[Query], server: Server, limit_note: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    env = {**os.environ, **OFFLINE}
    for q in qs:  # one process per query, so server counters split cleanly per query
        before = server.stats()
        cmd = [str(LOTUS_PY), str(HERE / "lotus_side.py"), "--base-url", server.base_url,
               "--model", server.model, "--queries", q.name]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if not lines:
            raise RuntimeError(f"LOTUS {q.name} failed{limit_note}: {proc.stderr[-2000:]}")
        res = json.loads(lines[-1])
        res["server"] = _delta(server.stats(), before)
        res["got"] = {tuple(r) for r in res.pop("rows")}
        out[q.name] = res
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", nargs="*", help="query names (default: all)")
    ap.add_argument("--server", choices=("sim", "llama"), default="sim")
    ap.add_argument("--time-scale", type=float, default=1.0)
    ap.add_argument("--profile", default="default")
    ap.add_argument("--out", default=None)
    ap.add_argument("--limit", type=int, help="first N rows of every table (both systems)")
    args = ap.parse_args(argv)
    if args.limit:  # read by workloads.runner.load_tables and by lotus_side.py
        os.environ["BENCH_ROW_LIMIT"] = str(args.limit)
    if not LOTUS_PY.exists():
        raise SystemExit("LOTUS is not installed: see docs/benchmarks.md (.venv-lotus)")
    qs = by_name(args.queries)
    server = Server(args.server, args.time_scale, args.profile)
    rows: list[dict[str, Any]] = []
    try:
        lotus = run_lotus(qs, server, "")
        for q in qs:
            truth = truth_rows(q)
            ours = run_ours(q, server, args.time_scale)
            theirs = lotus[q.name]
            for system, res in (("duckdb-sem", ours), ("LOTUS", theirs)):
                srv = res["server"]
                rows.append({
                    "query": q.name, "system": system, "wall_s": round(res["wall_s"], 2),
                    "gpu_busy_s": round(srv.get("virtual_seconds", 0.0), 2),
                    "llm_requests": int(srv.get("finished", 0)),
                    "prompt_tokens": int(srv.get("prefill_tokens", 0)
                                         + srv.get("cached_tokens", 0)),
                    "completion_tokens": int(srv.get("decode_tokens", 0)),
                    "f1": round(accuracy(res["got"], truth), 3),
                    "error": res.get("error") or "",
                })  # fmt: skip
            a, b = rows[-2], rows[-1]
            print(f"{q.name}: duckdb-sem {a['wall_s']}s {a['llm_requests']} req F1 {a['f1']} | "
                  f"LOTUS {b['wall_s']}s {b['llm_requests']} req F1 {b['f1']} "
                  f"-> {b['wall_s'] / max(a['wall_s'], 1e-9):.2f}x {a['error'][:80]} "
                  f"{b['error'][:80]}", flush=True)  # fmt: skip
    finally:
        server.close()
    write(rows, args)


def write(rows: list[dict[str, Any]], args: Any) -> None:
    name = args.out or ("lotus" if args.server == "sim" else "lotus_llama")
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / f"{name}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    label = ("SIMULATED Qwen3-32B (8x A100 TP=8) over HTTP, time scale "
             f"{args.time_scale}" if args.server == "sim"
             else "REAL SmolLM2-135M on llama-cpp-python's server, 2 CPU threads")  # fmt: skip
    lines = [f"# duckdb-sem vs LOTUS ({label})", "",
             f"Command: `{' '.join(['python benchmarks/bench_lotus.py', *sys.argv[1:]])}`", "",
             "| query | duckdb-sem s | LOTUS s | speed-up | requests (ours / LOTUS) | "
             "prompt tokens (ours / LOTUS) | F1 (ours / LOTUS) |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for i in range(0, len(rows), 2):
        a, b = rows[i], rows[i + 1]
        lines.append(
            f"| {a['query']} | {a['wall_s']} | {b['wall_s']} | "
            f"{b['wall_s'] / max(a['wall_s'], 1e-9):.2f}x | {a['llm_requests']} / "
            f"{b['llm_requests']} | {a['prompt_tokens']} / {b['prompt_tokens']} | "
            f"{a['f1']} / {b['f1']}{_errors(a, b)} |"
        )
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")


def _errors(ours: dict[str, Any], theirs: dict[str, Any]) -> str:
    said = [f"{who} error: {r['error'][:60]}" for who, r in (("duckdb-sem", ours), ("LOTUS", theirs))
            if r["error"]]  # fmt: skip
    return f" ({'; '.join(said)})" if said else ""


if __name__ == "__main__":
    main()
