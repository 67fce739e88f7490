"""The SIMULATED server over real sockets: the ``openai:`` backend and plain HTTP clients."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from processes import stop
from sim_serving import sim_serving

from duckdb_sem.backends.openai import OpenAIBackend
from duckdb_sem.backends.registry import create_backend
from duckdb_sem.backends.sim.backend import create
from duckdb_sem.backends.sim.oracles import estimate_tokens
from duckdb_sem.backends.sim.server import SimServer, decision_logprobs
from duckdb_sem.errors import ConfigError
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import OperatorKind


@pytest.fixture
def server() -> Iterator[SimServer]:
    with sim_serving("sim:default?selectivity=0.3&seed=1") as server:
        yield server


def test_openai_backend_over_sim_server_matches_direct_sim(server: SimServer) -> None:
    remote = create_backend(f"openai:{server.base_url}")
    assert isinstance(remote, OpenAIBackend) and remote.server_kind == "sim"
    assert remote.simulated and remote.describe().startswith("SIMULATED")
    direct = create_backend("sim:default?selectivity=0.3&seed=1")
    reqs = [build_request(OperatorKind.FILTER, f"review {i}") for i in range(60)]
    over_http = remote.complete(reqs)
    local = direct.complete(reqs)
    assert [c.value for c in over_http] == [c.value for c in local]
    assert [c.score for c in over_http] == pytest.approx([c.score for c in local], abs=1e-6)
    assert 5 < sum(bool(c.value) for c in local) < 35
    assert server.backend.virtual_seconds > 0
    assert remote.count_tokens("four words right here") == estimate_tokens("four words right here")
    assert remote.load().running == 0
    remote.close()
    direct.close()


def test_plain_clients_see_simulated_everywhere(server: SimServer) -> None:
    root = server.base_url.removesuffix("/v1")
    with httpx.Client() as client:
        assert client.get(root + "/health").json()["simulated"] is True
        model = client.get(server.base_url + "/models").json()["data"][0]
        assert model["id"].startswith("SIMULATED-") and "SIMULATED" in model["description"]
        body = {"model": model["id"], "prompt": "Is this good?", "max_tokens": 1, "logprobs": 2}
        resp = client.post(server.base_url + "/completions", json=body)
        assert resp.headers["X-Simulated"].startswith("duckdb-sem")
        data = resp.json()
        assert data["system_fingerprint"].startswith("SIMULATED")
        assert data["choices"][0]["text"] in ("yes", "no")
        assert set(data["choices"][0]["logprobs"]["top_logprobs"][0]) == {"yes", "no"}
        chat = {"model": model["id"], "messages": [{"role": "user", "content": "hi"}]}
        text = client.post(server.base_url + "/chat/completions", json=chat).json()
        assert text["choices"][0]["message"]["content"]
        wrong = client.post(server.base_url + "/chat/completions", json={**chat, "model": "gpt"})
        assert wrong.status_code == 404
        assert "vllm:num_requests_running" in client.get(root + "/metrics").text
    yes, no = decision_logprobs(2.0)
    assert yes - no == pytest.approx(2.0) and yes > no


def test_wrong_model_name_is_a_clear_error(server: SimServer) -> None:
    with pytest.raises(ConfigError, match="is not served"):
        create_backend(f"openai:{server.base_url}?model=Qwen3-32B")


@pytest.mark.integration
def test_cli_sim_server_process() -> None:
    """Port 0: the server binds a free port itself and reports it (no pick-then-bind race)."""
    code = "from duckdb_sem.cli.main import main; main()"
    cmd = [sys.executable, "-c", code, "sim-server", "--profile", "tiny", "--listen",
           "127.0.0.1:0", "--selectivity", "1.0"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # "SIMULATED server on http://127.0.0.1:PORT/v1 — ..."
        found = re.search(r"(http://127\.0\.0\.1:(\d+)/v1)", line)
        assert found and found.group(2) != "0", f"sim-server did not report its port: {line!r}"
        url = found.group(1)
        backend = create_backend(f"openai:{url}")
        out = backend.complete([build_request(OperatorKind.FILTER, "anything")])
        assert out[0].value is True
        backend.close()
    finally:
        stop(proc)


def test_two_servers_of_one_model_are_replicas_of_one_scheduler() -> None:
    from duckdb_sem.errors import SchedulerError
    from duckdb_sem.scheduler.core import Scheduler
    from duckdb_sem.scheduler.seu import SEU

    sims = [create("sim:default?selectivity=0.3&seed=1") for _ in range(2)]
    servers = [SimServer(b).start() for b in sims]
    other = create("sim:tiny?selectivity=0.3&seed=1")
    other_server = SimServer(other).start()
    try:
        a, b = (create_backend(f"openai:{s.base_url}") for s in servers)
        assert a.backend_id != b.backend_id  # each names its server ...
        scheduler = Scheduler([a, b])  # ... but they serve one model: replicas
        assert "server=" in scheduler.backend_id and servers[0].base_url not in scheduler.backend_id
        reqs = tuple(build_request(OperatorKind.FILTER, f"review {i}") for i in range(200))
        futures = [scheduler.submit(SEU(f"q{k}", "f", reqs[k::4], 1.0)) for k in range(4)]
        answers = [c.value for f in futures for c in f.result(timeout=60).completions]
        direct = create("sim:default?selectivity=0.3&seed=1")
        expected = direct.complete([r for k in range(4) for r in reqs[k::4]])
        direct.close()
        assert answers == [c.value for c in expected]
        assert all(s.backend.virtual_seconds > 0 for s in servers)  # both replicas answered
        scheduler.close()
        c = create_backend(f"openai:{other_server.base_url}")
        with pytest.raises(SchedulerError, match="same model"):
            Scheduler([a, c])
        for backend in (a, b, c):
            backend.close()
    finally:
        for server in (*servers, other_server):
            server.close()
        for backend in (*sims, other):
            backend.close()
