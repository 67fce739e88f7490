"""Backend identity covers every option that can change an answer, and nothing else.

For each backend kind, build it from a spec (models and servers replaced by stand-ins, so no
model loads), change one option and compare identities and request signatures (the cache key):
an answer-changing option must change both, an option that cannot change answers (threads,
timeouts, concurrency, retries, latency) must change neither. The options of each kind are
checked against the kind's declared ``OPTIONS``, so a new option must be classified here.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from duckdb_sem.backends import llama, openai, vllm
from duckdb_sem.backends.base import Backend
from duckdb_sem.backends.registry import create_backend, options_of
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import OperatorKind

# option -> two values that differ; every option each kind declares appears here
ANSWERING: dict[str, dict[str, tuple[str, str]]] = {
    "test": {
        "yes_if": ("good", "bad"),
        "hash": ("0.5", "0.25"),
        "selectivity": ("0.5", "0.3"),
    },
    "sim": {
        "selectivity": ("0.5", "0.3"),
        "seed": ("0", "1"),
        "output_words": ("8", "4"),
        "malformed": ("0", "0.2"),
    },
    "openai": {
        "model": ("m1", "m2"),
        "threshold": ("0", "0.5"),
        "top_logprobs": ("20", "5"),
        "structured": ("on", "off"),
    },
    "vllm": {
        "max_model_len": ("2048", "512"),
        "threshold": ("0", "0.5"),
        "top_logprobs": ("20", "5"),
    },
    "llama": {"n_ctx": ("2048", "1024"), "layout": ("canonical", "template")},
}
NEUTRAL: dict[str, dict[str, tuple[str, str]]] = {
    "test": {"latency_ms": ("0", "1"), "max_batch": ("256", "8")},
    "sim": {
        "time_scale": ("0", "0.001"),
        "fault": ("500", "reset"),
        "fail_rate": ("0", "0.5"),
        "hang_s": ("30", "5"),
        "retries": ("4", "1"),
        "retry_budget": ("60", "5"),
        "retry_backoff": ("0.25", "0.1"),
    },
    "openai": {
        "concurrency": ("2", "8"),
        "batch": ("on", "off"),
        "batch_rows": ("64", "4"),
        "timeout": ("60", "5"),
        "api_key_env": ("A_KEY", "B_KEY"),
        "retries": ("4", "1"),
        "retry_budget": ("60", "5"),
        "retry_backoff": ("0.25", "0.1"),
        "rpm": ("0", "600"),
        "tpm": ("0", "90000"),
    },
    "vllm": {"max_num_seqs": ("64", "8"), "gpu_memory_utilization": ("0.2", "0.3")},
    "llama": {"threads": ("1", "2"), "share_cpu": ("on", "off")},
}
# options that need more than a value to build (a labels file), covered by the table below
SPECIAL = {"sim": {"labels", "positive"}}
TARGETS = {
    "test": "test:",
    "sim": "sim:tiny",
    "openai": "openai:http://127.0.0.1:1/v1",
    "vllm": "vllm:/models/hf",
    "llama": "llama:MODEL",
}
REQUEST = build_request(OperatorKind.FILTER, "Is this review positive? Great fun")


class _FakeTokenizer:
    chat_template = "{{ messages }}"

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [len(text)]


class _FakeEngine:
    def get_tokenizer(self) -> _FakeTokenizer:
        return _FakeTokenizer()

    def has_unfinished_requests(self) -> bool:
        return False


@pytest.fixture(autouse=True)
def _stand_ins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No model loads and no server is asked: only the identity logic runs."""
    model = tmp_path / "model.gguf"
    model.write_bytes(b"gguf" * 10)
    TARGETS["llama"] = f"llama:{model}"
    monkeypatch.setattr(llama, "load_model", lambda *a, **k: types.SimpleNamespace())
    monkeypatch.setattr(openai, "discover", lambda _http, _url, name, spec: (name or "m", "vllm"))
    fake_vllm = types.SimpleNamespace(
        EngineArgs=lambda **kw: kw,
        LLMEngine=types.SimpleNamespace(from_engine_args=lambda _args: _FakeEngine()),
    )
    monkeypatch.setattr(vllm, "_import_vllm", lambda: fake_vllm)
    yield


def _build(kind: str, options: dict[str, str]) -> Backend:
    query = "&".join(f"{k}={v}" for k, v in options.items())
    return create_backend(f"{TARGETS[kind]}?{query}" if query else TARGETS[kind])


def _identity(kind: str, options: dict[str, str]) -> tuple[str, str]:
    backend = _build(kind, options)
    try:
        return backend.backend_id, REQUEST.signature(backend.backend_id)
    finally:
        backend.close()


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_every_declared_option_is_classified(kind: str) -> None:
    declared = {o.name for o in options_of(kind)}
    classified = set(ANSWERING[kind]) | set(NEUTRAL[kind]) | SPECIAL.get(kind, set())
    assert declared == classified
    answering = {o.name for o in options_of(kind) if o.answers}
    assert answering == set(ANSWERING[kind]) | SPECIAL.get(kind, set())


def _cases(table: dict[str, dict[str, tuple[str, str]]]) -> st.SearchStrategy[Any]:
    return st.sampled_from(sorted((k, o) for k, opts in table.items() for o in opts)).flatmap(
        lambda ko: st.tuples(st.just(ko), st.booleans())
    )


@settings(max_examples=40, deadline=None)
@given(case=_cases(ANSWERING))
def test_an_answer_changing_option_changes_identity_and_cache_key(case: Any) -> None:
    (kind, option), flip = case
    a, b = ANSWERING[kind][option]
    if flip:
        a, b = b, a
    first, second = _identity(kind, {option: a}), _identity(kind, {option: b})
    assert first[0] != second[0], f"{kind}: {option} is missing from the identity"
    assert first[1] != second[1], f"{kind}: {option} is missing from the cache key"


@settings(max_examples=40, deadline=None)
@given(case=_cases(NEUTRAL))
def test_an_option_that_cannot_change_answers_keeps_identity(case: Any) -> None:
    (kind, option), flip = case
    a, b = NEUTRAL[kind][option]
    if flip:
        a, b = b, a
    assert _identity(kind, {option: a}) == _identity(kind, {option: b})
    assert _identity(kind, {option: a}) == _identity(kind, {})


def test_sim_labels_file_is_part_of_the_identity(tmp_path: Path) -> None:
    ids = []
    for n, label in enumerate(("fresh", "rotten")):
        path = tmp_path / f"labels{n}.csv"
        path.write_text(f"key,label\nx,{label}\n")
        ids.append(_identity("sim", {"labels": str(path)})[0])
    ids.append(_identity("sim", {"labels": str(path), "positive": "rotten"})[0])
    assert len(set(ids)) == 3


def test_llama_identity_follows_the_model_file(tmp_path: Path) -> None:
    other = tmp_path / "other.gguf"
    other.write_bytes(b"gguf" * 11)
    first = _identity("llama", {})[0]
    TARGETS["llama"] = f"llama:{other}"
    assert _identity("llama", {})[0] != first
