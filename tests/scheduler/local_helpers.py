"""Local sidecars (``scheduler/local.py``) that tests start: in a short folder of their own,
found by their command line, stopped at the end."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from duckdb_sem.scheduler.local_paths import LocalPaths, local_paths


@contextmanager
def short_tmpdir() -> Iterator[Path]:
    """A fresh folder for ``TMPDIR`` (a unix socket path must stay under 108 bytes); the
    sidecars started under it are stopped and the folder removed at the end."""
    folder = Path(tempfile.mkdtemp(prefix="dsl", dir="/tmp"))
    try:
        yield folder
    finally:
        for pid in servers(folder):
            os.kill(pid, signal.SIGTERM)
        until(lambda: not servers(folder), 20)
        shutil.rmtree(folder, ignore_errors=True)


def paths_in(tmp: Path, spec: str, cache: Path | None = None) -> LocalPaths:
    """The files of the local sidecar of ``spec`` for a client whose ``TMPDIR`` is ``tmp``."""
    folder = tmp / f"duckdb-sem-{os.getuid()}"
    return local_paths(spec, cache, retry_failures=False, folder=folder)


def servers(tmp: Path) -> list[int]:
    """Process ids of the `duckdb-sem serve` processes listening under ``tmp``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and b"serve" in cmdline and any(str(tmp).encode() in a for a in cmdline):
            pids.append(int(entry.name))
    return pids


def get(paths: LocalPaths, path: str) -> dict[str, object]:
    """``GET path`` of the sidecar on ``paths.socket``, as JSON."""
    transport = httpx.HTTPTransport(uds=str(paths.socket))
    with httpx.Client(transport=transport, base_url="http://local") as http:
        data: dict[str, object] = http.get(path, timeout=10).json()
        return data


def until(ok: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ok():
            return True
        time.sleep(0.05)
    return ok()


def usage(paths: LocalPaths) -> dict[str, int]:
    found = get(paths, "/v1/status")["usage"]
    assert isinstance(found, dict)
    return found
