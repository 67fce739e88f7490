"""Sidecars trust nothing they did not make (issue 44 item 7).

The local sidecar's folder, socket, lock and log (``scheduler/safe_paths.py``): the folder is
made 0700 and refused when wider or another user's; a symlink, a folder or a file at the socket
path, or a symlink at the log, is an UnsafePathError and is never followed. A TCP sidecar
(``duckdb-sem serve``) requires a token on every request, files each client's queries under its
session (a client sees and cancels only its own), and gives the operator token all of them
(``scheduler/sidecar_auth.py``). Real ``duckdb-sem serve`` processes throughout, on the
deterministic rule backend, cache off.
"""

from __future__ import annotations

import gc
import os
import stat
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from local_helpers import get, paths_in, servers, short_tmpdir, until
from processes import stop

import duckdb_sem
from duckdb_sem.config import Settings
from duckdb_sem.errors import (
    QueryCancelledError,
    SemError,
    SidecarAuthError,
    SidecarError,
    UnsafePathError,
)
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.scheduler.local import LocalScheduler
from duckdb_sem.scheduler.local_paths import LocalPaths
from duckdb_sem.scheduler.seu import SEU
from duckdb_sem.scheduler.sidecar_client import SidecarClient

pytestmark = pytest.mark.integration

FAST = "test:?yes_if=good"
#: 16 requests, two a batch, 250 ms a batch: an SEU of it runs about 2 s
SLOW = "test:?yes_if=good&latency_ms=250&max_batch=2"
SERVE = "from duckdb_sem.cli.main import main; main()"


@pytest.fixture(autouse=True)
def _collect_leaked_sockets() -> Iterator[None]:
    """httpcore leaves the socket of a failed unix connect to the garbage collector: collect
    it here, its ResourceWarning ignored (``filterwarnings = error``)."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


@pytest.fixture
def tmp() -> Iterator[Path]:
    with short_tmpdir() as folder:
        yield folder


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUCKDB_SEM_")}
    return env | {"TMPDIR": str(tmp)} | extra


def _settings(spec: str = FAST) -> Settings:
    return Settings(backend=spec, cache_path=None, scheduler_idle_s=60.0)


def _local(tmp: Path, spec: str = FAST) -> LocalScheduler:
    """The local scheduler of ``spec`` for a process whose ``TMPDIR`` is ``tmp``."""
    return LocalScheduler(_settings(spec), folder=tmp / f"duckdb-sem-{os.getuid()}")


def _filter_seu(query_id: str, texts: list[str]) -> SEU:
    requests = tuple(build_request(OperatorKind.FILTER, text) for text in texts)
    return SEU(query_id, "sem_filter#1", requests, float(len(requests)))


def _values(client: SidecarClient | LocalScheduler, seu: SEU) -> list[object]:
    result = client.submit(seu).result(timeout=60)
    return [c.value for c in result.completions]


@dataclass
class Served:
    proc: subprocess.Popen[str]
    line: str  # the start line (the URL, with a generated client token)
    url: str  # the URL without a token


def _serve(tmp: Path, *args: str, spec: str = FAST, env: dict[str, str] | None = None) -> Served:
    """Start ``duckdb-sem serve`` (cache off) and wait for its start line."""
    cmd = [sys.executable, "-c", SERVE, "serve", "--backend", spec, "--cache", "off", *args]
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env if env is not None else _env(tmp),
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise AssertionError(f"duckdb-sem serve exited with {proc.wait()}")
        if "listening on " in line:
            shown = line.split("listening on ", 1)[1].split()[0]
            url = shown
            if "@" in shown:
                scheme, _, rest = shown.partition("://")
                url = f"{scheme}://{rest.rpartition('@')[2]}"
            # drain the rest of stderr, so the server never blocks on a full pipe
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return Served(proc, line, url)
    stop(proc)
    raise AssertionError("duckdb-sem serve did not start")


def _run_serve(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``duckdb-sem serve`` expecting it to refuse to start."""
    cmd = [sys.executable, "-c", SERVE, "serve", "--backend", FAST, "--cache", "off", *args]
    return subprocess.run(
        cmd, capture_output=True, text=True, env=_env(tmp), timeout=120, check=False
    )


# -- 1. the local sidecar's folder ---------------------------------------------------------


def test_the_local_folder_is_made_0700_and_the_sidecar_answers(tmp: Path) -> None:
    local = _local(tmp)
    try:
        folder = local.paths.socket.parent
        assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o700
        assert os.lstat(folder).st_uid == os.getuid()
        assert _values(local, _filter_seu("q", ["a good one", "a dull one"])) == [True, False]
        # the socket is this user's alone, and the log a regular 0600 file of ours
        assert stat.S_IMODE(os.lstat(local.paths.socket).st_mode) == 0o600
        log = os.lstat(local.paths.log)
        assert stat.S_ISREG(log.st_mode) and stat.S_IMODE(log.st_mode) == 0o600
    finally:
        local.close()


def test_a_folder_open_to_others_is_refused_naming_it_and_the_fix(tmp: Path) -> None:
    folder = tmp / f"duckdb-sem-{os.getuid()}"
    folder.mkdir()
    folder.chmod(0o777)
    with pytest.raises(UnsafePathError) as caught:
        _local(tmp)
    message = str(caught.value)
    assert str(folder) in message and "0777" in message and f"chmod 700 {folder}" in message
    assert isinstance(caught.value, SemError)
    # refused before anything was made in it, and no sidecar started
    assert list(folder.iterdir()) == []
    assert servers(tmp) == []
    assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o777  # not "fixed" behind our back


def test_a_group_writable_folder_is_refused_too(tmp: Path) -> None:
    folder = tmp / f"duckdb-sem-{os.getuid()}"
    folder.mkdir()
    folder.chmod(0o770)
    with pytest.raises(UnsafePathError, match="0770"):
        _local(tmp)
    assert servers(tmp) == []


def test_a_folder_of_another_user_is_refused(tmp: Path) -> None:
    folder = tmp / f"duckdb-sem-{os.getuid()}"
    folder.mkdir(mode=0o700)
    try:
        os.chown(folder, 65534, 65534)
    except PermissionError:
        pytest.skip("cannot chown a folder to another user (not root)")
    with pytest.raises(UnsafePathError) as caught:
        _local(tmp)
    message = str(caught.value)
    assert str(folder) in message and "uid 65534" in message and "not to you" in message
    assert "TMPDIR" in message  # how to get out of it
    assert list(folder.iterdir()) == []
    assert servers(tmp) == []


def test_a_symlink_in_place_of_the_folder_is_refused(tmp: Path) -> None:
    real = tmp / "elsewhere"
    real.mkdir(mode=0o700)
    (tmp / f"duckdb-sem-{os.getuid()}").symlink_to(real)
    with pytest.raises(UnsafePathError, match="symlink"):
        _local(tmp)
    assert list(real.iterdir()) == []
    assert servers(tmp) == []


# -- 2. a symlink at the socket path -------------------------------------------------------


def _planted(tmp: Path) -> LocalPaths:
    paths = paths_in(tmp, FAST)
    paths.socket.parent.mkdir(mode=0o700)
    return paths


def test_a_symlink_at_the_socket_is_refused_never_followed_to_another_sidecar(
    tmp: Path,
) -> None:
    other_socket = tmp / "other.sock"
    other = _serve(tmp, "--listen", f"unix:{other_socket}")
    try:
        paths = _planted(tmp)
        paths.socket.symlink_to(other_socket)
        with pytest.raises(UnsafePathError) as caught:
            _local(tmp)
        assert str(paths.socket) in str(caught.value) and "symlink" in str(caught.value)
        # the client given that path as a URL refuses it as well
        with pytest.raises(UnsafePathError, match="symlink"):
            SidecarClient(f"unix://{paths.socket}", token="")
        # a client process's query fails so, and is not answered by the other sidecar
        script = (
            "import duckdb_sem\n"
            "try:\n"
            "    con = duckdb_sem.connect(backend='test:?yes_if=good', cache='off', "
            "scheduler='local')\n"
            "    print(con.sql(\"SELECT sem_filter('{0} is positive', 'a good one')\").fetchall())\n"
            "except Exception as err:\n"
            "    print(type(err).__name__, err)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            env=_env(tmp),
            timeout=120,
            check=False,
        )
        assert "UnsafePathError" in done.stdout, done.stdout + done.stderr[-2000:]
        assert "symlink" in done.stdout and "True" not in done.stdout
        other_paths = LocalPaths("x", other_socket, tmp / "x.lock", tmp / "x.log")
        usage = get(other_paths, "/v1/status")["usage"]
        assert isinstance(usage, dict) and usage["virtual_calls"] == 0
        assert paths.socket.is_symlink()  # refused, not removed behind the user's back
        assert servers(tmp) == [other.proc.pid]  # no local sidecar was started either
    finally:
        stop(other.proc)


# -- 3. a symlink at the log ---------------------------------------------------------------


def test_a_symlink_at_the_log_is_refused_and_its_target_untouched(tmp: Path) -> None:
    victim = tmp / "victim.txt"
    victim.write_text("precious data\n" * 100)
    before = victim.read_bytes()
    paths = _planted(tmp)
    paths.log.symlink_to(victim)
    with pytest.raises(UnsafePathError) as caught:
        _local(tmp)
    message = str(caught.value)
    assert str(paths.log) in message and "symlink" in message and f"rm {paths.log}" in message
    assert victim.read_bytes() == before  # neither truncated nor written
    assert victim.stat().st_size == len(before)
    assert paths.log.is_symlink()
    assert servers(tmp) == []


def test_a_symlink_at_the_start_lock_is_refused_and_its_target_untouched(tmp: Path) -> None:
    victim = tmp / "victim.txt"
    victim.write_text("precious data\n")
    paths = _planted(tmp)
    paths.lock.symlink_to(victim)
    with pytest.raises(UnsafePathError, match="symlink"):
        _local(tmp)
    assert victim.read_text() == "precious data\n"
    assert servers(tmp) == []


@pytest.mark.parametrize("unix", [False, True], ids=["tcp", "unix"])
def test_serve_refuses_a_symlinked_token_file_leaving_its_target_untouched(
    tmp: Path, unix: bool
) -> None:
    victim = tmp / "victim.txt"
    victim.write_text("precious data\n")
    planted = tmp / "sidecar.token"
    planted.symlink_to(victim)
    where = tmp / "s.sock"
    listen = ["--listen", f"unix:{where}", "--token", "t0"] if unix else ["--listen", "127.0.0.1:0"]
    done = _run_serve(tmp, *listen, "--token-file", str(planted))
    assert done.returncode != 0
    assert "symlink" in done.stderr and str(planted) in done.stderr
    assert "Traceback" not in done.stderr  # a clear error, not a crash
    assert "listening on" not in done.stderr  # it never served
    assert victim.read_text() == "precious data\n"
    assert not where.exists()  # nor left its socket behind


# -- 4. a folder (or a file) at the socket path --------------------------------------------


def test_a_folder_at_the_socket_path_is_an_unsafe_path_error_not_is_a_directory(
    tmp: Path,
) -> None:
    paths = _planted(tmp)
    paths.socket.mkdir()
    with pytest.raises(UnsafePathError) as caught:
        _local(tmp)
    assert isinstance(caught.value, SemError) and isinstance(caught.value, SidecarError)
    assert str(paths.socket) in str(caught.value) and "a folder" in str(caught.value)
    with pytest.raises(UnsafePathError, match="a folder"):
        SidecarClient(f"unix://{paths.socket}", token="")
    # a query on it: the same error, through connect() (which attaches at once)
    try:
        with pytest.raises(UnsafePathError, match="a folder"):
            con = duckdb_sem.connect(backend=FAST, cache="off", scheduler=f"unix://{paths.socket}")
            con.sql("SELECT sem_filter('{0} is positive', 'a good one')").fetchall()
    except IsADirectoryError:  # pragma: no cover - the bug this guards against
        pytest.fail("IsADirectoryError leaked through")
    assert paths.socket.is_dir()  # not removed
    assert servers(tmp) == []


def test_a_regular_file_at_the_socket_path_is_refused_and_kept(tmp: Path) -> None:
    paths = _planted(tmp)
    paths.socket.write_text("not a socket")
    with pytest.raises(UnsafePathError, match="a regular file"):
        _local(tmp)
    assert paths.socket.read_text() == "not a socket"


def test_serve_refuses_to_listen_where_a_folder_is(tmp: Path) -> None:
    where = tmp / "dir.sock"
    where.mkdir()
    done = _run_serve(tmp, "--listen", f"unix:{where}")
    assert done.returncode != 0
    assert "UnsafePathError" in done.stderr and "a folder" in done.stderr
    assert where.is_dir()


# -- 5. a TCP sidecar and its tokens -------------------------------------------------------


@dataclass
class Tcp:
    served: Served
    client: str
    operator: str
    token_file: Path


def _tokens(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


@pytest.fixture(scope="module")
def tcp() -> Iterator[Tcp]:
    with short_tmpdir() as folder:
        token_file = folder / "tokens"
        served = _serve(
            folder, "--listen", "127.0.0.1:0", "--token-file", str(token_file), spec=SLOW
        )
        try:
            found = _tokens(token_file)
            yield Tcp(
                served,
                found["DUCKDB_SEM_SCHEDULER_TOKEN"],
                found["DUCKDB_SEM_SCHEDULER_OPERATOR_TOKEN"],
                token_file,
            )
        finally:
            stop(served.proc)


def test_the_token_file_is_0600_and_the_start_line_carries_the_client_token(tcp: Tcp) -> None:
    st = os.lstat(tcp.token_file)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert tcp.client and tcp.operator and tcp.client != tcp.operator
    assert f"://:{tcp.client}@" in tcp.served.line  # generated: shown to whoever started it
    assert tcp.operator not in tcp.served.line


def test_requests_without_a_token_get_401(tcp: Tcp) -> None:
    url = tcp.served.url
    assert httpx.get(f"{url}/v1/status", timeout=10).status_code == 401
    assert httpx.get(f"{url}/v1/health", timeout=10).status_code == 401
    cancel = httpx.post(f"{url}/v1/cancel", json={"query_id": "q"}, timeout=10)
    assert cancel.status_code == 401
    error = cancel.json()["error"]
    assert error["type"] == "SidecarAuthError" and "token" in error["message"]
    assert cancel.headers["www-authenticate"].startswith("Bearer")
    seu = httpx.post(f"{url}/v1/seu", content=b"{}", timeout=10)
    assert seu.status_code == 401
    wrong = {"Authorization": "Bearer not-the-token"}
    assert httpx.get(f"{url}/v1/status", headers=wrong, timeout=10).status_code == 401
    # the token, as a bearer or as the basic password, is let in
    right = {"Authorization": f"Bearer {tcp.client}"}
    assert httpx.get(f"{url}/v1/status", headers=right, timeout=10).status_code == 200
    basic = url.replace("://", f"://:{tcp.client}@", 1)
    assert httpx.get(f"{basic}/v1/status", timeout=10).status_code == 200


def _ids(status: dict[str, object]) -> list[str]:
    queries = status["queries"]
    assert isinstance(queries, list)
    return [str(q["query_id"]) for q in queries]


TEXTS = [f"review {i} {'good' if i % 2 else 'dull'}" for i in range(16)]
EXPECTED = [i % 2 == 1 for i in range(16)]


def test_clients_see_and_cancel_only_their_own_queries_the_operator_all(tcp: Tcp) -> None:
    url = tcp.served.url
    a = SidecarClient(url, token=tcp.client)
    b = SidecarClient(url, token=tcp.client)
    operator = SidecarClient(url, token=tcp.operator)
    try:
        running = a.submit(_filter_seu("qa", TEXTS))
        assert until(lambda: "qa" in _ids(a.status()), 10)  # A sees its own, label stripped
        labelled = [q for q in _ids(operator.status()) if q.endswith("/qa")]
        assert len(labelled) == 1  # the operator sees it, under A's label
        assert "qa" not in _ids(b.status()) and labelled[0] not in _ids(b.status())
        assert _ids(b.status()) == []  # B sees nothing of A's
        # B cancels A's query by both its names: neither reaches it
        for name in ("qa", labelled[0]):
            response = b._http.post("/v1/cancel", json={"query_id": name}, timeout=10)
            assert response.status_code == 200
            b.finish_query(name)
        result = running.result(timeout=60)
        assert [c.value for c in result.completions] == EXPECTED  # A's finished, right
        # the operator cancels A's next query by its labelled id
        running = a.submit(_filter_seu("qa2", TEXTS))
        assert until(lambda: any(q.endswith("/qa2") for q in _ids(operator.status())), 10)
        (target,) = [q for q in _ids(operator.status()) if q.endswith("/qa2")]
        response = operator._http.post("/v1/cancel", json={"query_id": target}, timeout=10)
        assert response.status_code == 200
        with pytest.raises(QueryCancelledError):
            running.result(timeout=30)
    finally:
        for client in (a, b, operator):
            client.close()


def test_a_query_through_connect_with_the_token_in_the_url(tcp: Tcp) -> None:
    url = tcp.served.url.replace("://", f"://:{tcp.client}@", 1)
    con = duckdb_sem.connect(backend=SLOW, cache="off", scheduler=url)
    try:
        rows = con.sql(
            "SELECT t, sem_filter('{0} is positive', t) FROM (VALUES ('a good one'), ('a dull one'),"
            " ('good again')) v(t) ORDER BY t"
        ).fetchall()
    finally:
        con.close()
    assert rows == [("a dull one", False), ("a good one", True), ("good again", True)]


def test_a_wrong_token_is_a_clear_sidecar_auth_error(tcp: Tcp) -> None:
    url = tcp.served.url.replace("://", "://:not-the-token@", 1)
    with pytest.raises(SidecarAuthError) as caught:
        SidecarClient(url)
    message = str(caught.value)
    assert "refused the token from the URL" in message
    assert "not-the-token" not in message  # never shown
    assert caught.value.sqlstate == "28000"
    with pytest.raises(SidecarAuthError, match="requires a token and none was given"):
        SidecarClient(tcp.served.url, token="")


def test_the_token_from_the_environment(tcp: Tcp, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUCKDB_SEM_SCHEDULER_TOKEN", tcp.client)
    client = SidecarClient(tcp.served.url)
    try:
        assert _values(client, _filter_seu("qe", ["a good one", "meh"])) == [True, False]
    finally:
        client.close()
    monkeypatch.setenv("DUCKDB_SEM_SCHEDULER_TOKEN", "wrong")
    with pytest.raises(SidecarAuthError, match="DUCKDB_SEM_SCHEDULER_TOKEN"):
        SidecarClient(tcp.served.url)


def test_the_token_from_the_environment_in_a_client_process(tcp: Tcp) -> None:
    script = (
        "import sys, duckdb_sem\n"
        "con = duckdb_sem.connect(backend=sys.argv[1], cache='off', scheduler=sys.argv[2])\n"
        "print(con.sql(\"SELECT t, sem_filter('{0} is positive', t) FROM (VALUES ('good'), "
        "('dull')) v(t) ORDER BY t\").fetchall())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, SLOW, tcp.served.url],
        capture_output=True,
        text=True,
        env=_env(Path("/tmp"), DUCKDB_SEM_SCHEDULER_TOKEN=tcp.client),
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[('dull', False), ('good', True)]"


def test_serve_writes_the_default_token_file_0600_in_the_private_folder(tmp: Path) -> None:
    served = _serve(tmp, "--listen", "127.0.0.1:0", "--token", "given-client-token")
    try:
        port = served.url.rpartition(":")[2]
        folder = tmp / f"duckdb-sem-{os.getuid()}"
        path = folder / f"sidecar-{port}.token"
        assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o700
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
        found = _tokens(path)
        assert found["DUCKDB_SEM_SCHEDULER_TOKEN"] == "given-client-token"
        assert "given-client-token" not in served.line  # a token given is never printed
        operator = found["DUCKDB_SEM_SCHEDULER_OPERATOR_TOKEN"]
        headers = {"Authorization": f"Bearer {operator}"}
        status = httpx.get(f"{served.url}/v1/status", headers=headers, timeout=10)
        assert status.status_code == 200
    finally:
        stop(served.proc)


def test_a_unix_sidecar_given_a_token_requires_it(tmp: Path) -> None:
    where = tmp / "tok.sock"
    served = _serve(tmp, "--listen", f"unix:{where}", "--token", "unix-token")
    try:
        assert stat.S_IMODE(os.lstat(Path(f"{where}.token")).st_mode) == 0o600
        with pytest.raises(SidecarAuthError):
            SidecarClient(f"unix://{where}", token="")
        client = SidecarClient(f"unix://{where}?token=unix-token")
        try:
            assert _values(client, _filter_seu("qu", ["good"])) == [True]
        finally:
            client.close()
    finally:
        stop(served.proc)
