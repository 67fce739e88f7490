"""The ``openai:`` client's CPU per row: one HTTP request a row against batch requests.

One ``duckdb-sem sim-server`` process (SIMULATED, ``time_scale=0``: it answers at once, on the
other core) and, in this process, one ``OpenAIBackend`` per mode (``batch=off``: one chat
request a row; ``batch=on``: vLLM's ``/v1/chat/completions/batch``, at most ``batch_rows``
rows a request) answering the same ``--batches`` batches of ``--rows`` distinct ~300-token
filter rows, the modes taking turns batch by batch. Reported per mode: this process's CPU per
row (what a sidecar pays to dispatch to servers over HTTP) and wall time per row, and that the
answers agree. Written to ``results/openai_batch.md``. ``--url`` measures against a server
already running instead (vLLM's own, say: ``python -m vllm.entrypoints.openai.api_server``),
written to ``results/openai_batch_<kind>.md``.

    python benchmarks/bench_openai_batch.py            # ~20 s
    python benchmarks/bench_openai_batch.py --url http://127.0.0.1:8000/v1 --batches 10
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from _results import RESULTS, write_report
from _servers import free_port, wait_http

from duckdb_sem.backends.openai import OpenAIBackend
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import LLMRequest, OperatorKind

_FILLER = " ".join(["the critic found the pacing uneven but the lead performance strong"] * 22)


def _batch(k: int, rows: int) -> list[LLMRequest]:
    return [
        build_request(OperatorKind.FILTER, f"Is this review positive? {k}-{j} " + _FILLER)
        for j in range(rows)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--rows", type=int, default=16, help="rows a batch (an SEU's)")
    parser.add_argument("--profile", default="qwen3-4b-a100")
    parser.add_argument("--url", help="a running OpenAI-compatible server's /v1 URL instead")
    args = parser.parse_args()
    server = None
    url = args.url
    if url is None:
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "duckdb_sem.cli.main", "sim-server", "--profile",
             args.profile, "--time-scale", "0", "--listen", f"127.0.0.1:{port}"],
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_http(url + "/models")
        modes = {"one request a row": "off", "batch requests": "on"}
        backends = {
            mode: OpenAIBackend(url, concurrency=64, batch=flag == "on")
            for mode, flag in modes.items()
        }
        cpu = dict.fromkeys(modes, 0.0)
        wall = dict.fromkeys(modes, 0.0)
        answers: dict[str, list[object]] = {mode: [] for mode in modes}
        for k in range(args.batches + 1):
            requests = _batch(k, args.rows)
            for mode, backend in backends.items():
                c0, w0 = time.process_time(), time.perf_counter()
                out = backend.complete(requests)
                if k:  # the first batch warms connections and threads
                    cpu[mode] += time.process_time() - c0
                    wall[mode] += time.perf_counter() - w0
                    answers[mode] += [c.value for c in out]
        kind = backends["batch requests"].server_kind
        model = backends["batch requests"].model
        for backend in backends.values():
            backend.close()
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
    n = args.batches * args.rows
    same = answers["one request a row"] == answers["batch requests"]
    lines = [
        "# The openai: client: one HTTP request a row against batch requests",
        "",
        (
            f"One `duckdb-sem sim-server` process (SIMULATED `{args.profile}`, time_scale 0), "
            if server is not None
            else f"A {kind} server at {url} serving `{model}` (on the same machine), "
        )
        + f"{args.batches} batches of {args.rows} distinct ~300-token filter rows, the two "
        "modes taking turns batch by batch; CPU is this (client) process's.",
        "",
        "| mode | client CPU us/row | wall us/row |",
        "|---|---|---|",
        *(f"| {m} | {1e6 * cpu[m] / n:.0f} | {1e6 * wall[m] / n:.0f} |" for m in modes),
        "",
        f"Answers equal in both modes: {same} ({n} rows).",
    ]
    out = RESULTS / ("openai_batch.md" if server is not None else f"openai_batch_{kind}.md")
    command = "python benchmarks/bench_openai_batch.py"
    if server is None:
        command += f" --url URL --batches {args.batches} --rows {args.rows}"
    write_report(out, lines, command)
    print("\n".join(lines))
    if not same:
        raise SystemExit("the two modes answered differently")


if __name__ == "__main__":
    main()
