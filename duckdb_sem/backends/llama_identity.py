"""What can change the answers of ``llama:``: its identity (see :mod:`.identity`) and spec options.

Kept apart from :mod:`.llama` so the identity can be built and tested without loading a model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from duckdb_sem.backends.identity import Answers, digest
from duckdb_sem.backends.registry import SpecOption
from duckdb_sem.llm.prompts import DECIDE_EXAMPLES

__all__ = ["LAYOUTS", "OPTIONS", "PROMPT_FORMAT", "LlamaAnswers", "llama_answers"]

#: version of how :mod:`.llama_prompts` lays out chats (prefix, few-shot turns, row); bump it
#: when the layout changes, so cached answers of the old layout are not served
#: 2: the BOS token where the GGUF asks for it (gemma); 3: a pair's first side is evaluated as
#: a segment of its own (llama.py ``_pair_cut``), which moved llama.cpp's batch boundaries;
#: 4: segments end on whole row groups after the lead (:mod:`.llama_segments`), so every
#: decision scores bit for bit as under 2 again
PROMPT_FORMAT = 4

#: how one-field filter decisions are laid out (``layout=``): ``canonical`` asks every phrasing
#: in one layout (:mod:`duckdb_sem.llm.canonical`), ``template`` as the template is written
LAYOUTS = ("canonical", "template")

OPTIONS = (
    SpecOption("n_ctx", "context length in tokens; longer prompts are cut (default 2048)", True),
    SpecOption("threads", "CPU threads (default: the CPUs this process may use, at most 8)"),
    SpecOption(
        "layout",
        "canonical: one-field filter decisions asked in one layout whatever their phrasing "
        "(default; llm/canonical.py); template: as the template is written",
        True,
    ),
    SpecOption(
        "share_cpu",
        "on: evaluate in turns with other processes on this machine, a row at a time "
        "(default on; backends/cpu_turns.py)",
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class LlamaAnswers(Answers):
    n_ctx: int = 2048
    few_shot: str = ""  # digest of the few-shot examples in every decision's prefix
    calibration: str = ""  # how content-free calibration rows are built
    prompt_format: int = PROMPT_FORMAT
    layout: str = "template"  # one of LAYOUTS


def llama_answers(
    path: Path, *, n_ctx: int, calibration: str, layout: str = "template"
) -> LlamaAnswers:
    """The identity of the model file at ``path`` (name and size) under these options."""
    return LlamaAnswers(
        kind="llama",
        model=f"{path.name}:{path.stat().st_size}",
        n_ctx=n_ctx,
        few_shot=digest(DECIDE_EXAMPLES),
        calibration=calibration,
        layout=layout,
    )
