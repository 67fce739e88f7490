"""The SIMULATED backend's answers for the query set, from the datasets' labels.

Every text value starts with its row id (``[r17] ...``) and every instruction carries a phrase
from ``queries.py``; :class:`WorkloadOracle` finds the phrase and the ids in the whole prompt
(system and user parts), so it answers duckdb-sem's prompts and LOTUS's alike. Decisions come
back as booleans, or as ``True``/``False`` text when a client generates free text (LOTUS).
``noise`` makes a hashed share of decisions wrong (a model is not the labels).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from duckdb_sem.backends.sim.oracles import NoLabel, unit_hash
from duckdb_sem.llm.request import LLMRequest, Task

from . import queries as q

DATA = Path(__file__).resolve().parent / "data"
_IDS = re.compile(r"\[([rpedtf]\d+)\]")
_REPLY = re.compile(r"^\[e\d+\] (Re|RE|re):")
_URL = re.compile(r"http|www\.")

__all__ = ["WorkloadOracle", "load_table"]


def load_table(name: str) -> dict[str, dict[str, str]]:
    with open(DATA / f"{name}.csv", newline="", encoding="utf-8") as f:
        return {row["id"]: row for row in csv.DictReader(f)}


class WorkloadOracle:
    """Answers every instruction of the query set from the labels (see the module docstring)."""

    def __init__(self, *, noise: float = 0.0) -> None:
        self.noise = noise
        self.reviews = load_table("reviews")
        self.plots = load_table("plots")
        self.emails = load_table("emails")
        self.packages = load_table("packages")
        self.tags = load_table("tags")
        self.fortunes = load_table("fortunes")
        tag = {t["id"]: t["tag"] for t in self.tags.values()}
        uses = {k: set(v["use_tags"].split(";")) for k, v in self.packages.items()}
        e = self.emails
        # Longest phrase first, so no phrase is found inside another one's prompt by accident.
        rules: list[tuple[str, Callable[[list[str]], Any]]] = [
            (q.POSITIVE, lambda ids: self.reviews[_one(ids, "r")]["fresh"] == "True"),
            (q.ABOUT, lambda ids: self.reviews[_one(ids, "r")]["movie"]
             == self.plots[_one(ids, "p")]["movie"]),
            (q.ADVERT, lambda ids: e[_one(ids, "e")]["spam"] == "True"),
            (q.REPLY, lambda ids: bool(_REPLY.match(e[_one(ids, "e")]["subject"]))),
            (q.URL, lambda ids: bool(_URL.search(e[_one(ids, "e")]["body"]))),
            (q.GAME, lambda ids: "use::gameplaying" in uses[_one(ids, "d")]),
            (q.CONVERT, lambda ids: "use::converting" in uses[_one(ids, "d")]),
            (q.USED_FOR, lambda ids: tag[_one(ids, "t")] in uses[_one(ids, "d")]),
            (q.VIEW_EDIT, lambda ids: bool({"use::viewing", "use::editing"}
                                           & uses[_one(ids, "d")])),
            (q.COMPUTERS, lambda ids: self.fortunes[_one(ids, "f")]["category"] == "computers"),
        ]  # fmt: skip
        self.decisions = sorted(rules, key=lambda rule: -len(rule[0]))
        self.maps: list[tuple[str, Callable[[list[str]], str]]] = [
            (q.TOPIC, lambda ids: self.fortunes[_one(ids, "f")]["category"]),
            (q.MAIN_USE, lambda ids: "[{}] {}".format(
                _one(ids, "d"),
                " ".join(sorted(t.split("::")[1] for t in uses[_one(ids, "d")])[:2]))),
            (q.SUMMARY, lambda ids: f"{len(ids)} subjects about mail, offers and lists"),
        ]  # fmt: skip

    @property
    def identity(self) -> str:
        return f"workload-labels:{self.noise}"

    def answer(self, request: LLMRequest) -> Any:
        text = f"{request.prefix}\n{request.row}"
        ids = _IDS.findall(text)
        for phrase, fn in self.maps:
            if phrase in text:
                return fn(ids)
        for phrase, fn in self.decisions:
            if phrase in text:
                value = bool(fn(ids))
                if self.noise and unit_hash("noise", phrase, *ids) < self.noise:
                    value = not value
                if request.output.task is Task.DECIDE:
                    return value
                return "True" if value else "False"  # a free-text client (LOTUS)
        raise NoLabel(f"no workload instruction in {text[-80:]!r}")


def _one(ids: list[str], prefix: str) -> str:
    for i in ids:
        if i.startswith(prefix):
            return i
    raise NoLabel(f"no [{prefix}...] id in the prompt")
