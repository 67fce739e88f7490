"""The client side of the scheduler sidecar: a :class:`SchedulerClient` over HTTP.

``SidecarClient(url)`` talks to ``duckdb-sem serve`` at ``http://HOST:PORT`` or
``unix:///path/to.sock``. Each SEU is one POST answered with all its completions; ``submit``
returns a future at once and waits on a small thread pool. Connection failures become
:class:`~duckdb_sem.errors.SidecarError` with the URL and how to fix it; errors raised in the
sidecar come back as the same class of the error tree.

A sidecar with tokens (every TCP one) needs one on each request: the client sends the token of
its URL (``http://:TOKEN@host:port`` or ``?token=TOKEN``), else ``DUCKDB_SEM_SCHEDULER_TOKEN``,
as ``Authorization: Bearer``, and a random session token of its own (``X-Sem-Session``) under
which the sidecar files its queries (:mod:`.sidecar_auth`). A 401 is a
:class:`~duckdb_sem.errors.SidecarAuthError` that says how to pass the token. URLs in messages
never show the token. A unix socket is checked before each connect (:mod:`.safe_paths`): a
symlink, anything but a socket, or (without a token) another user's socket is an
UnsafePathError, not a connect.

An SEU may wait long in a busy sidecar's queue, so its POST has no read timeout; instead, while
SEUs are in flight, a watchdog asks ``/v1/health`` every ``liveness_s / 3`` seconds. A sidecar
that answers neither a health check nor any SEU for ``liveness_s`` (default
:data:`LIVENESS_S`, 6 s; a stopped, hung or unplugged process) fails every waiting SEU with a
:class:`~duckdb_sem.errors.SidecarError` that says so. An SEU answered counts as a sign of
life: an overloaded sidecar may answer health checks late (they queue behind its SEUs on its
event loop) while it still answers SEUs, and its waiting SEUs are then its work, not lost.
``cancel`` is sent in the background, so ``con.interrupt()`` returns at once even when the
sidecar does not answer.

``on_unreachable`` (the local scheduler's, :mod:`.local`) is called when an SEU cannot even
connect: it never reached a sidecar, so after the callback has started a new one the SEU is
sent once more (while the callback runs, the watchdog counts no silence: a start loads a
model). An SEU whose connection breaks after it was sent fails with SidecarError.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx

from duckdb_sem.config import scheduler_token
from duckdb_sem.errors import SidecarAuthError, SidecarError
from duckdb_sem.scheduler.protocol import decode_error, decode_result, encode_seu
from duckdb_sem.scheduler.safe_paths import socket_at
from duckdb_sem.scheduler.seu import SEU, SEUResult
from duckdb_sem.scheduler.sidecar_auth import SESSION_HEADER, split_token

__all__ = ["LIVENESS_S", "SidecarClient"]

#: seconds a sidecar may go without answering a health check while SEUs wait on it
LIVENESS_S = 6.0

log = logging.getLogger(__name__)

#: tries of a connect to the sidecar before SidecarError (0.2 s, then 0.4 s apart)
_CONNECT_ATTEMPTS = 3

_HINT = (
    "start it with `duckdb-sem serve --backend SPEC --listen HOST:PORT`, or set "
    "DUCKDB_SEM_SCHEDULER=inprocess (scheduler='inprocess') to schedule in process"
)


class SidecarClient:
    """Thread-safe; one per process and URL is enough (``scheduler_for`` shares it).

    ``token``: the sidecar's token when the URL carries none; None (the default) reads
    ``DUCKDB_SEM_SCHEDULER_TOKEN``, ``""`` sends none."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        connect_timeout: float = 5.0,
        workers: int = 64,
        liveness_s: float = LIVENESS_S,
        hint: str = _HINT,
        on_unreachable: Callable[[], None] | None = None,
    ) -> None:
        url, in_url = split_token(url)
        self.url = url  # never the token: it goes into messages and logs
        self._token = in_url or (scheduler_token() if token is None else token)
        self._token_from = "the URL" if in_url else "DUCKDB_SEM_SCHEDULER_TOKEN"
        self.liveness_s = liveness_s
        self._hint = hint
        self._on_unreachable = on_unreachable
        transport: httpx.HTTPTransport | None = None
        base = url.rstrip("/")
        self._socket: Path | None = None
        if url.startswith("unix:"):
            self._socket = Path(url.removeprefix("unix:").removeprefix("//"))
            transport = httpx.HTTPTransport(uds=str(self._socket))
            base = "http://sidecar"
        elif not url.startswith(("http://", "https://")):
            raise SidecarError(f"scheduler URL {url!r} must start with http:// or unix://")
        limits = httpx.Limits(max_connections=workers, max_keepalive_connections=workers)
        headers = {SESSION_HEADER: secrets.token_urlsafe(16)}  # names this client's queries
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        self._http = httpx.Client(
            base_url=base,
            transport=transport,
            limits=limits,
            headers=headers,
            timeout=httpx.Timeout(None, connect=connect_timeout),
        )
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sem-sidecar")
        self._lock = threading.Lock()
        self._waiting: set[Future[SEUResult]] = set()
        self._wake = threading.Event()
        self._closed = False
        self._watchdog: threading.Thread | None = None
        self._starting = 0  # on_unreachable calls under way (a new sidecar is starting)
        self._heard = 0.0  # when the sidecar last answered an SEU (time.monotonic)
        self.server_pid: int | None = None
        health = self.health()
        self.backend_id: str = str(health["backend_id"])
        self.policy: str = str(health.get("policy", ""))

    def _check_socket(self) -> None:
        """Refuse a unix socket path that holds a symlink or anything but a socket (without a
        token: anything but this user's socket), before httpx follows it."""
        if self._socket is not None:
            socket_at(self._socket, own=not self._token)

    def _authorized(self, response: httpx.Response) -> httpx.Response:
        if response.status_code != 401:
            return response
        if self._token:
            what = f"refused the token from {self._token_from}"
        else:
            what = "requires a token and none was given"
        raise SidecarAuthError(
            f"the scheduler sidecar at {self.url} {what}: pass the token in the URL "
            "(DUCKDB_SEM_SCHEDULER=http://:TOKEN@HOST:PORT, or ?token=TOKEN) or in "
            "DUCKDB_SEM_SCHEDULER_TOKEN; `duckdb-sem serve` prints the URL with its token when "
            "it starts and writes its tokens to its token file (mode 0600)"
        )

    def _connecting(self, send: Callable[[], httpx.Response]) -> httpx.Response:
        """Send, retrying a failed *connect* a few times with backoff.

        A connect that fails never reached the sidecar, so trying again cannot run anything
        twice; a busy sidecar (64 clients on two cores) can miss one connect deadline. Any other
        failure, or a sidecar that stays unreachable, is raised at once or after the retries.
        """
        for attempt in range(_CONNECT_ATTEMPTS):
            self._check_socket()
            try:
                return send()
            except (httpx.ConnectError, httpx.ConnectTimeout):
                if attempt == _CONNECT_ATTEMPTS - 1:
                    raise
                time.sleep(0.2 * 2**attempt)
        raise AssertionError("unreachable")

    def _get(self, path: str) -> dict[str, object]:
        try:
            response = self._connecting(lambda: self._http.get(path, timeout=10.0))
        except httpx.HTTPError as err:
            raise SidecarError(
                f"cannot reach the scheduler sidecar at {self.url} ({type(err).__name__}: {err}); "
                + self._hint
            ) from None
        data: dict[str, object] = self._authorized(response).json()
        return data

    def health(self) -> dict[str, object]:
        """``/v1/health``; remembers the sidecar's process id (``server_pid``)."""
        health = self._get("/v1/health")
        pid = health.get("pid")
        self.server_pid = pid if isinstance(pid, int) else None
        return health

    def status(self) -> dict[str, object]:
        return self._get("/v1/status")

    def submit(self, seu: SEU) -> Future[SEUResult]:
        body = encode_seu(seu)
        future: Future[SEUResult] = Future()
        with self._lock:
            self._waiting.add(future)
            if self._watchdog is None:
                self._watchdog = threading.Thread(
                    target=self._watch, name="sem-sidecar-watchdog", daemon=True
                )
                self._watchdog.start()
        self._wake.set()
        self._pool.submit(self._answer, future, body)
        return future

    def _answer(self, future: Future[SEUResult], body: bytes) -> None:
        try:
            result = self._post_seu(body)
        except BaseException as err:  # noqa: BLE001 - every failure goes to the future
            self._settle(future, error=err)
        else:
            self._settle(future, result=result)

    def _settle(
        self,
        future: Future[SEUResult],
        *,
        result: SEUResult | None = None,
        error: BaseException | None = None,
    ) -> None:
        with self._lock:
            if future not in self._waiting:
                return  # already failed by the watchdog
            self._waiting.discard(future)
        if error is not None:
            future.set_exception(error)
        else:
            assert result is not None
            future.set_result(result)

    def _watch(self) -> None:
        """Fail the waiting SEUs when the sidecar stops answering health checks."""
        period = self.liveness_s / 3
        last_answer = time.monotonic()
        while not self._closed:
            with self._lock:
                idle = not self._waiting or self._starting > 0  # a start loads a model: wait
            if idle:
                self._wake.clear()
                self._wake.wait(timeout=period)
                last_answer = time.monotonic()
                continue
            probed = time.monotonic()
            try:
                self._http.get("/v1/health", timeout=period)
            except httpx.HTTPError:
                silent = time.monotonic() - max(last_answer, self._heard)
                if silent >= self.liveness_s:
                    self._fail_waiting(silent)
                    last_answer = time.monotonic()
                # a refused connect fails at once: wait out the period before the next probe
                time.sleep(max(0.0, period - (time.monotonic() - probed)))
                continue
            last_answer = time.monotonic()
            self._wake.clear()
            self._wake.wait(timeout=period)  # set by close(): stop at once

    def _fail_waiting(self, silent: float) -> None:
        with self._lock:
            stuck, self._waiting = list(self._waiting), set()
        error = SidecarError(
            f"the scheduler sidecar at {self.url} stopped answering (no health reply and no "
            f"SEU answered in {silent:.0f} s; the process may be stopped or hung); {len(stuck)} "
            "waiting SEU(s) failed; " + self._hint
        )
        for future in stuck:
            future.set_exception(error)

    def _post_seu(self, body: bytes) -> SEUResult:
        def send() -> httpx.Response:
            return self._http.post(
                "/v1/seu", content=body, headers={"Content-Type": "application/json"}
            )

        try:
            try:
                response = self._first_send(send)
            except (httpx.ReadError, httpx.RemoteProtocolError):
                # A kept-alive connection the sidecar reset before answering (seen under load:
                # ECONNRESET on a reused socket). Sending the SEU again is safe: identical work
                # is fused with the first copy if it is still running, or answered by the cache.
                response = self._connecting(send)
        except httpx.HTTPError as err:
            raise SidecarError(
                f"the scheduler sidecar at {self.url} did not answer an SEU "
                f"({type(err).__name__}: {err}); it may have died mid-query; " + self._hint
            ) from None
        self._heard = time.monotonic()  # alive: the watchdog counts this as an answer
        return decode_result(self._authorized(response).content)

    def _first_send(self, send: Callable[[], httpx.Response]) -> httpx.Response:
        """Send; a connect that fails goes to ``on_unreachable`` (if any), then once more."""
        if self._on_unreachable is None:
            return self._connecting(send)
        self._check_socket()
        try:
            return send()
        except (httpx.ConnectError, httpx.ConnectTimeout):
            with self._lock:
                self._starting += 1
            try:
                self._on_unreachable()  # may raise SidecarError: it could not start one
            finally:
                with self._lock:
                    self._starting -= 1
        return self._connecting(send)

    def _post(self, path: str, query_id: str) -> None:
        try:
            self._check_socket()
            response = self._http.post(path, json={"query_id": query_id}, timeout=10.0)
        except (httpx.HTTPError, SidecarError) as err:
            log.warning("scheduler sidecar at %s: %s failed: %s", self.url, path, err)
            return
        if response.status_code == 401:
            log.warning(
                "scheduler sidecar at %s: %s refused: no token, or a wrong one", self.url, path
            )
        elif response.status_code != 200:
            log.warning("scheduler sidecar: %s", decode_error(json.loads(response.content)))

    def cancel(self, query_id: str) -> None:
        """Send the cancel in the background: the caller (``interrupt()``) never waits on it."""
        threading.Thread(
            target=self._post, args=("/v1/cancel", query_id), name="sem-sidecar-cancel", daemon=True
        ).start()

    def finish_query(self, query_id: str) -> None:
        self._post("/v1/finish", query_id)

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._http.close()
