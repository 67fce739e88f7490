"""Checking, once per llama.cpp build, that it can evaluate a prompt on this CPU.

``llama-cpp-python`` compiles llama.cpp from source with ``-march=native``: on a CPU with AMX
(Intel Sapphire Rapids and later) that build uses ggml's AMX matrix kernels, and with 0.3.36
those crash the process (SIGSEGV in ``ggml_backend_amx_mul_mat``) on the first prompt. A crash
in C takes the user's Python session with it and prints nothing useful, so before the first
model of a process is loaded :func:`check_llama_build` evaluates two tokens in a child process.
If the child dies of a signal, loading raises :class:`BackendUnavailableError` naming the build
and the command that rebuilds it without native kernels (what ``scripts/install`` runs).

The answer is remembered per build and CPU in ``~/.cache/duckdb-sem/llama-probe-<key>.ok``
(key: the library's path, size and mtime, and the CPU's flags), so the probe (about a second)
runs once per machine and build, not once per process. A failure is never remembered: a
rebuilt library has a new key.
"""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
import threading
from pathlib import Path

from duckdb_sem.config import default_cache_path
from duckdb_sem.errors import BackendUnavailableError

__all__ = ["REBUILD_COMMAND", "check_llama_build"]

#: the build flags scripts/install uses: AVX2-level kernels (any x86-64-v3 CPU), no AMX
SAFE_CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
)
REBUILD_COMMAND = (
    f'CMAKE_ARGS="{SAFE_CMAKE_ARGS}" pip install --force-reinstall --no-cache-dir --no-deps '
    "llama-cpp-python==0.3.36"
)

_PROBE = """
import sys
from llama_cpp import Llama
llama = Llama(model_path=sys.argv[1], n_ctx=64, n_threads=1, n_threads_batch=1, verbose=False)
llama.eval(llama.tokenize(b"probe", add_bos=True))
"""

_checked: set[str] = set()
_lock = threading.Lock()


def check_llama_build(model: Path, *, timeout_s: float = 120.0) -> None:
    """Raise BackendUnavailableError if this process's llama.cpp build crashes on a prompt."""
    library = _library()
    if library is None:  # no llama_cpp: the loader says how to install it
        return
    key = _key(library)
    with _lock:
        if key in _checked:
            return
        marker = default_cache_path().parent / f"llama-probe-{key}.ok"
        if not marker.is_file():
            _probe(model, library, timeout_s)
            try:
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.write_text(f"{library}\n")
            except OSError:
                pass  # an unwritable cache dir only means probing again next process
        _checked.add(key)


def _library() -> Path | None:
    try:
        import llama_cpp
    except ModuleNotFoundError:
        return None
    lib = Path(llama_cpp.__file__).resolve().parent / "lib"
    candidates = sorted(lib.glob("libggml-cpu.so*")) or sorted(lib.glob("libllama.so*"))
    return candidates[0] if candidates else Path(llama_cpp.__file__).resolve()


def _key(library: Path) -> str:
    stat = library.stat()
    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = line
                break
    except OSError:
        pass
    text = f"{library}:{stat.st_size}:{stat.st_mtime_ns}:{flags}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _probe(model: Path, library: Path, timeout_s: float) -> None:
    argv = [sys.executable, "-c", _PROBE, str(model)]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return  # slow is not broken: the real load goes ahead and will say what is wrong
    if done.returncode >= 0:
        return  # it ran (an error exit is a Python error the real load reports better)
    name = signal.Signals(-done.returncode).name
    raise BackendUnavailableError(
        f"llama backend: llama.cpp ({library.parent}) crashed with {name} evaluating a prompt "
        "on this CPU, so loading a model would take this process down. Its build uses CPU "
        "kernels this machine cannot run (llama-cpp-python compiles with -march=native; on a "
        "CPU with AMX, ggml's AMX matrix kernels crash). Rebuild it without native kernels: "
        f"{REBUILD_COMMAND}   (scripts/install in a checkout does this)"
    )
