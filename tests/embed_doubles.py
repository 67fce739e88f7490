"""TEST DOUBLES for embedding work: an embedder with hand-set vectors, and a join oracle.

Neither is a model. ``KeywordEmbedder`` gives each text the unit vector of the keywords it
contains (one axis per keyword, so similarity is keyword overlap, known in advance);
``SameTopicJudge`` answers a join "yes" exactly when both sides name the same ``topicN``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from duckdb_sem.backends.base import Answers, Backend, Capacity
from duckdb_sem.backends.embedder import Embedder
from duckdb_sem.llm.request import Completion, LLMRequest

__all__ = ["KeywordEmbedder", "SameTopicJudge", "topic_tables"]


class KeywordEmbedder(Embedder):
    """TEST DOUBLE: axis ``i`` counts keyword ``keywords[i]``; the last axis is a constant
    (so a text without keywords still has a direction and every similarity is defined)."""

    def __init__(self, keywords: Sequence[str]) -> None:
        self.spec = "keyword-double:"
        self.keywords = [k.lower() for k in keywords]
        self.dimensions = len(self.keywords) + 1
        self.answers = Answers(kind="keyword-double", model=",".join(self.keywords))
        self.texts_embedded = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts_embedded += len(texts)
        out = []
        for text in texts:
            words = re.findall(r"\w+", text.lower())
            out.append([float(words.count(k)) for k in self.keywords] + [0.1])
        return out


class SameTopicJudge(Backend):
    """TEST DOUBLE LLM: a decision is yes iff the row names the same ``topicN`` twice."""

    def __init__(self) -> None:
        self.spec = "same-topic-double:"
        self.answers = Answers(kind="same-topic-double", model="oracle")
        self.asked = 0

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        out = []
        for r in requests:
            self.asked += 1
            topics = re.findall(r"topic\d+", r.row)
            yes = len(topics) == 2 and topics[0] == topics[1]
            out.append(Completion(yes, "yes" if yes else "no", 1, 1, score=1.0 if yes else -1.0))
        return out

    def capacity(self) -> Capacity:
        return Capacity(max_batch=256)

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def topic_tables(con: Any, topics: int, left: int) -> None:
    """Tables ``l`` (``left`` rows, each naming one of ``topics`` topics and its keyword, every
    7th a neighbour's keyword too) and ``r`` (one row per topic), for a same-topic join."""
    con.execute(
        f"CREATE TABLE l AS SELECT i AS id, 'topic' || (i % {topics}) || ' w' || (i % {topics}) "
        f"|| CASE WHEN i % 7 = 0 THEN ' w' || ((i + 1) % {topics}) ELSE '' END AS txt "
        f"FROM range({left}) t(i)"
    )
    con.execute(
        f"CREATE TABLE r AS SELECT i AS rid, 'topic' || i || ' w' || i AS body "
        f"FROM range({topics}) t(i)"
    )
