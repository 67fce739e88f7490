"""Resident memory of the embedded default (``llama:``) with both of its models loaded.

Information, not a gate. ``llama:`` answers decisions and closed answers on gemma-3-270m and
generation on SmolLM2-135M-Instruct (``duckdb_sem.backends.llama_default``); issue 17 allows
two models if the process stays under 1 GiB. This loads both (one request of each task kind,
so each model's KV cache is allocated and used) and reports the peak resident set size
(``getrusage``) against a bare Python process with the package imported.

    python benchmarks/bench_model_memory.py --threads 1
"""

from __future__ import annotations

import argparse
import resource
from pathlib import Path

from _results import RESULTS

from duckdb_sem.backends.llama_default import DefaultLlamaBackend
from duckdb_sem.backends.registry import create_backend
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import OperatorKind


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS / "model_memory.md")
    args = parser.parse_args()
    before = peak_mib()
    backend = create_backend(f"llama:?threads={args.threads}")
    assert isinstance(backend, DefaultLlamaBackend)
    requests = [
        build_request(OperatorKind.FILTER, "Is this review positive? Great fun. " * 40),
        build_request(OperatorKind.MAP, "Kind of package? A chess game " * 40,
                      output_type="VARCHAR", labels=("game", "science")),
        build_request(OperatorKind.MAP, "Summarize in five words: a ship sinks " * 40),
    ]  # fmt: skip
    answers = backend.complete(requests)
    after = peak_mib()
    lines = [
        "# Resident memory of the embedded default (`llama:`)",
        "",
        f"Backend `{backend.backend_id}`, {args.threads} thread(s); one decision, one closed "
        "answer and one generation (both models loaded, KV caches of n_ctx=2048 in use).",
        "",
        "| | peak RSS (MiB) |",
        "|---|---|",
        f"| Python with duckdb_sem imported | {before:.0f} |",
        f"| after both models answered | {after:.0f} |",
        "",
        f"Answers: {[a.value for a in answers]}",
        "",
        f"Reproduce: `python benchmarks/bench_model_memory.py --threads {args.threads}`",
        "",
    ]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
