"""``DUCKDB_SEM_SCHEDULER=local``: one sidecar per user and backend, started on demand
(unset, the road of an embedded backend: ``scheduler/shared.py``).

The processes of a user that run the same backend spec (with the same result cache file) share
one ``duckdb-sem serve`` on a unix socket in ``$TMPDIR/duckdb-sem-<uid>/``
(:mod:`.local_paths`): one model in memory, one KV cache, one queue, one result cache, fusion
across processes. The first process to need it starts it; the others find it.

- **Trust.** The folder is made 0700 and refused (UnsafePathError, naming it) when another
  user owns it or its mode is wider; the socket, lock and log are never followed through a
  symlink, and anything but our own socket at the socket path is refused, not removed
  (:mod:`.safe_paths`). The sidecar serves only its user's processes (``SO_PEERCRED``).
- **Start.** A process connects to the socket; if nothing listens it takes the start lock
  (``flock``), looks again (a racing process may have started one meanwhile), removes a stale
  socket (a killed sidecar's), and starts ``duckdb-sem serve --listen unix:SOCKET --idle-exit
  DUCKDB_SEM_SCHEDULER_IDLE`` in a session of its own (a Ctrl-C in the first process's terminal
  does not stop the others' scheduler), its stderr to ``sched-<key>.log``. Two racing processes
  start one sidecar.
- **A client that dies** closes its connections; the sidecar cancels its queries
  (:mod:`.sidecar_server`: the loop sees its connection end).
- **A sidecar that dies** fails the SEUs in flight with SidecarError (it may have run them);
  the next SEU that finds no sidecar starts a new one and is sent there
  (``SidecarClient(on_unreachable=...)``).
- **Idle.** The sidecar exits after ``DUCKDB_SEM_SCHEDULER_IDLE`` seconds (default 300) without
  a request: it removes its socket under the start lock, serves what is already connected a
  moment longer, and goes. A process that dies, client or sidecar, leaves nothing stuck: the
  kernel drops its lock, and a stale socket is replaced.

The policy and aging rate are those of the process that started the sidecar; a client asking
for another policy gets a logged warning, as in process (docs/scheduler.md).
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path

from duckdb_sem.config import Settings
from duckdb_sem.errors import SidecarError
from duckdb_sem.scheduler.local_paths import LocalPaths, local_paths, start_lock
from duckdb_sem.scheduler.safe_paths import open_own_file, private_folder, socket_at
from duckdb_sem.scheduler.seu import SEU, SEUResult
from duckdb_sem.scheduler.sidecar_client import SidecarClient

__all__ = ["LocalScheduler", "ensure_server"]

log = logging.getLogger(__name__)

#: how long a start may take: loading the model included (seconds)
START_TIMEOUT_S = 300.0

_SERVE = "from duckdb_sem.cli.main import main; main()"
_NOT_PASSED = (
    "DUCKDB_SEM_SCHEDULER",
    "DUCKDB_SEM_SCHEDULER_TOKEN",
    "DUCKDB_SEM_SCHEDULER_OPERATOR_TOKEN",
)
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding duckdb_sem/


class LocalScheduler:
    """A :class:`~.seu.SchedulerClient` on the local sidecar of ``settings.backend``, started
    when missing (thread-safe; ``scheduler_for`` shares one per process and spec)."""

    def __init__(self, settings: Settings, *, folder: Path | None = None) -> None:
        self.paths = local_paths(
            settings.backend,
            settings.cache_path,
            retry_failures=settings.retry_failures,
            folder=folder,
        )
        self.url = f"unix://{self.paths.socket}"
        self._settings = settings
        self._lock = threading.Lock()
        hint = (
            f"the local scheduler ({self.paths.socket}; its log {self.paths.log}) may have been "
            "killed: the next query starts a new one; or set DUCKDB_SEM_SCHEDULER=inprocess to "
            "schedule in process"
        )
        ensure_server(settings, self.paths)
        try:
            client = SidecarClient(self.url, token="", hint=hint, on_unreachable=self._restart)
        except SidecarError:  # it retired between our look and our attach: start another
            ensure_server(settings, self.paths)
            client = SidecarClient(self.url, token="", hint=hint, on_unreachable=self._restart)
        self._client = client
        self.backend_id = client.backend_id
        if client.policy and client.policy != settings.policy:
            log.warning(
                "%s: the local scheduler (pid %s) runs policy %s, started by another process; "
                "this one asked for %s, which applies only to a scheduler started after it exits",
                self.backend_id,
                client.server_pid,
                client.policy,
                settings.policy,
            )

    @property
    def server_pid(self) -> int | None:
        """The sidecar's process id, as of the last start or attach."""
        return self._client.server_pid

    def _restart(self) -> None:
        with self._lock:  # one start per process at a time; the flock orders processes
            ensure_server(self._settings, self.paths)
            self._client.health()

    def submit(self, seu: SEU) -> Future[SEUResult]:
        return self._client.submit(seu)

    def cancel(self, query_id: str) -> None:
        self._client.cancel(query_id)

    def finish_query(self, query_id: str) -> None:
        self._client.finish_query(query_id)

    def status(self) -> dict[str, object]:
        return self._client.status()

    @property
    def policy(self) -> str:
        return self._client.policy

    def close(self) -> None:
        """Detach (the sidecar stays for other processes until it has been idle long enough)."""
        self._client.close()


def ensure_server(settings: Settings, paths: LocalPaths) -> None:
    """Make sure a sidecar listens on ``paths.socket``, starting one if none does.

    Raises UnsafePathError for a folder that is not this user's private one, and for anything
    at the socket path but a socket of this user's (a symlink included: never followed)."""
    private_folder(paths.socket.parent)
    if socket_at(paths.socket, own=True) and _listening(paths.socket):
        return
    with start_lock(paths.lock):
        # another process may have started it while we waited
        if socket_at(paths.socket, own=True):
            if _listening(paths.socket):
                return
            log.info("removing the stale local scheduler socket %s", paths.socket)
            paths.socket.unlink(missing_ok=True)
        _start(settings, paths)


def _listening(path: Path) -> bool:
    """Whether a process accepts connections on the unix socket ``path`` (a stopped one
    does too: the kernel queues them; the client's liveness check covers that case)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(2.0)
        try:
            probe.connect(str(path))
        except OSError:
            return False
        return True


def _start(settings: Settings, paths: LocalPaths) -> None:
    cmd = [sys.executable, "-c", _SERVE, "serve", "--backend", settings.backend]
    cmd += ["--listen", f"unix:{paths.socket}", "--policy", settings.policy]
    cmd += ["--idle-exit", f"{settings.scheduler_idle_s:g}"]
    cache = settings.cache_path
    cmd += ["--cache", str(cache.expanduser().resolve()) if cache is not None else "off"]
    if settings.aging_rate is not None:
        cmd += ["--aging-rate", str(settings.aging_rate)]
    # no token: the 0700 folder and the peer's uid keep other users out
    env = {k: v for k, v in os.environ.items() if k not in _NOT_PASSED}
    env["DUCKDB_SEM_RETRY_FAILURES"] = "1" if settings.retry_failures else "0"
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(_PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p
    )
    with os.fdopen(open_own_file(paths.log, truncate=True), "wb") as log_file:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log_file,
            env=env,
            start_new_session=True,  # not stopped by a Ctrl-C meant for this process
        )
    # reap it when it exits (while this process lives), so no zombie stays behind
    threading.Thread(target=proc.wait, name="sem-local-reaper", daemon=True).start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SidecarError(
                f"the local scheduler for backend {settings.backend!r} exited with code "
                f"{proc.returncode} while starting: {_tail(paths.log)} (full log: {paths.log}); "
                "fix the backend spec, or set DUCKDB_SEM_SCHEDULER=inprocess to schedule in process"
            )
        if _listening(paths.socket):
            log.info("started the local scheduler (pid %s) on %s", proc.pid, paths.socket)
            return
        time.sleep(0.05)
    proc.kill()
    raise SidecarError(
        f"the local scheduler for backend {settings.backend!r} did not listen on "
        f"{paths.socket} within {START_TIMEOUT_S:g} s (log: {paths.log}); it was stopped. "
        "Check the log, or set DUCKDB_SEM_SCHEDULER=inprocess to schedule in process"
    )


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(text[-lines:]) or "(empty log)"
