"""Start ``duckdb-sem serve`` as a real process on a free port, and client scripts against it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from processes import stop

SERVE = "from duckdb_sem.cli.main import main; main()"


@contextmanager
def sidecar(
    *args: str, cache: Path | None = None, timeout: float = 120.0
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUCKDB_SEM_")}
    cmd = [sys.executable, "-c", SERVE, "serve", "--listen", "127.0.0.1:0", *args]
    cmd += ["--cache", str(cache) if cache else "off"]
    proc = subprocess.Popen(
        cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env
    )
    try:
        url = None
        deadline = time.monotonic() + timeout
        assert proc.stderr is not None
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                raise AssertionError(f"sidecar exited with {proc.wait()}")
            if "listening on " in line:
                url = line.split("listening on ", 1)[1].split()[0]
                break
        assert url, "sidecar did not start"
        yield url, proc
    finally:
        stop(proc, timeout=20)


CLIENT = r"""
import json, sys, threading
import duckdb_sem
url, backend, connections, rows_json, template = sys.argv[1:6]
rows = json.loads(rows_json)
out = {}
errors = []
def work(k):
    try:
        con = duckdb_sem.connect(backend=backend, cache="off", scheduler=url)
        con.execute("CREATE TABLE t AS SELECT * FROM (SELECT unnest($1) AS text)", [rows[k]])
        result = con.sql(f"SELECT text, sem_filter('{template}', text) FROM t").fetchall()
        out[k] = [[text, ok] for text, ok in result]
    except Exception as err:
        errors.append(repr(err))
threads = [threading.Thread(target=work, args=(k,)) for k in range(int(connections))]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps({"results": out, "errors": errors}))
"""


def start_client(
    url: str, backend: str, rows: list[list[str]], template: str
) -> subprocess.Popen[str]:
    """A client process with one connection (thread) per row list, each running a sem_filter."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUCKDB_SEM_")}
    return subprocess.Popen(
        [sys.executable, "-c", CLIENT, url, backend, str(len(rows)), json.dumps(rows), template],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def client_results(proc: subprocess.Popen[str], timeout: float = 600) -> dict[str, object]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-2000:]
    data: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return data
