"""Where the sidecar's CPU per request goes: its logic alone, and behind HTTP (issue 29 item 4).

Two readings of CPU time (not wall time, so they hold up better than a load benchmark on a
busy machine; still, take them alone for figures to quote), both with 8 rule-based replicas
(``test:``, which simulate no engine) and SEUs of 16 distinct ~300-token filter requests:

1. **logic**: in this process, no HTTP: ``decode_seu`` -> ``Scheduler.submit`` -> the answer ->
   ``encode_result``, one SEU at a time; process CPU per request (the replicas' work included).
2. **served**: a ``duckdb-sem serve`` process, one client process sending the same SEUs over
   1, 8 or 64 keep-alive connections; the sidecar process's CPU per request (``/proc``).

The difference is what the HTTP front and the thread hand-offs cost per request.

    python benchmarks/sidecar_cpu_split.py
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time

from bench_sidecar_load import _FILLER, _cpu_s, _free_port, _wait

from duckdb_sem.backends.registry import create_backend
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.scheduler.core import Scheduler
from duckdb_sem.scheduler.protocol import decode_seu, encode_result, encode_seu
from duckdb_sem.scheduler.seu import SEU
from duckdb_sem.scheduler.sidecar_client import SidecarClient

ROWS = 16


def _seus(tag: str, n: int) -> list[SEU]:
    return [
        SEU(tag, "sem_filter", tuple(
            build_request(OperatorKind.FILTER, f"Is this review positive? {tag}-{k}-{j} " + _FILLER)
            for j in range(ROWS)
        ), 1.0)
        for k in range(n)
    ]  # fmt: skip


def logic(n: int) -> float:
    """Process CPU microseconds per request of decode, schedule, answer and encode."""
    scheduler = Scheduler([create_backend("test:") for _ in range(8)])
    bodies = [encode_seu(s) for s in _seus("logic", n)]
    started = time.process_time()
    for body in bodies:
        encode_result(scheduler.submit(decode_seu(body)).result())
    spent = time.process_time() - started
    scheduler.close()
    return spent / (n * ROWS) * 1e6


def served(n: int, connections: int) -> tuple[float, float]:
    """(sidecar CPU microseconds per request, requests/s) over ``connections`` connections."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "duckdb_sem.cli.main", "serve", "--cache", "off",
            "--listen", f"127.0.0.1:{port}"] + ["--backend", "test:"] * 8  # fmt: skip
    server = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
    try:
        _wait(f"{url}/v1/health")
        client = SidecarClient(url, workers=connections)
        for seu in _seus("warm", 20):
            client.submit(seu).result()
        work = [_seus(f"c{c}", n // connections) for c in range(connections)]

        def send(seus: list[SEU]) -> None:
            for seu in seus:
                client.submit(seu).result()

        threads = [threading.Thread(target=send, args=(w,)) for w in work]
        cpu0, wall0 = _cpu_s(server.pid), time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        cpu, wall = _cpu_s(server.pid) - cpu0, time.monotonic() - wall0
        client.close()
        requests = sum(len(w) for w in work) * ROWS
        return cpu / requests * 1e6, requests / wall
    finally:
        server.terminate()
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seus", type=int, default=400)
    args = parser.parse_args()
    print(f"logic (in process, no HTTP): {logic(args.seus * 4):.0f} us CPU per request", flush=True)
    for connections in (1, 8, 64):
        cpu, rate = served(args.seus, connections)
        print(f"served over {connections} connection(s): sidecar {cpu:.0f} us CPU per request, "
              f"{rate:.0f} requests/s", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
