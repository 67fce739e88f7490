"""A blocked sem_join through a real sidecar process: the pairs the block keeps are judged by
the sidecar's backend, the embeddings run in the client (they never go through the sidecar).

The sidecar's backend is the SIMULATED lookup oracle (``sim:...?labels=``: yes for the pairs of
one topic); the client's embedder is the TEST DOUBLE keyword embedder of the other blocking
tests.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from embed_doubles import KeywordEmbedder
from sidecar_helpers import sidecar

import duckdb_sem

pytestmark = pytest.mark.integration

TOPICS = 10
LEFT = 300  # 3,000 pairs: dense enough for the sample to bound recall 0.9 at 90%
QUERY = "SELECT l.id, r.rid FROM l JOIN r ON sem_join('{l.txt} is about {r.body}')"


def _labels(path: Path) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        out = csv.writer(handle)
        out.writerow(["key", "label"])
        for i in range(TOPICS):
            for j in range(TOPICS):
                row = f"topic{i} w{i} is about topic{j} w{j}"
                out.writerow([row, "yes" if i == j else "no"])
    return path


def test_a_join_is_blocked_through_the_sidecar(tmp_path: Path) -> None:
    backend = f"sim:tiny?labels={_labels(tmp_path / 'labels.csv')}&positive=yes"
    with sidecar("--backend", backend) as (url, _):
        got = {}
        for approximate in (False, True):
            con = duckdb_sem.connect(
                scheduler=url, cache="off", approximate=approximate, join_recall=0.9,
                embed_backend=KeywordEmbedder([f"w{i}" for i in range(TOPICS)]),
            )  # fmt: skip
            con.execute(
                f"CREATE TABLE l AS SELECT i AS id, 'topic' || (i % {TOPICS}) || ' w' || "
                f"(i % {TOPICS}) AS txt FROM range({LEFT}) t(i)"
            )
            con.execute(f"CREATE TABLE r AS SELECT i AS rid, 'topic' || i || ' w' || i AS body "
                        f"FROM range({TOPICS}) t(i)")  # fmt: skip
            plan = con.explain_semantic(QUERY)
            got[approximate] = (set(con.sql(QUERY).fetchall()), con.stats(), plan)
            con.close()
    (lossless, plain, plain_plan), (blocked, approx, approx_plan) = got[False], got[True]
    assert len(lossless) == LEFT and plain.physical_calls == TOPICS * TOPICS
    assert "BLOCKED" not in plain_plan
    assert "BLOCKED cosine >= " in approx_plan
    assert blocked <= lossless and len(blocked) >= 0.9 * len(lossless)
    assert approx.llm_calls < 0.7 * LEFT * TOPICS and approx.embed_calls > 0
