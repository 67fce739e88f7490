"""Several client processes with several connections against one sidecar running the real
embedded model: every answer equals the in-process answer, none lost or duplicated."""

from __future__ import annotations

import csv
import random
from pathlib import Path

import httpx
import pytest
from sidecar_helpers import client_results, sidecar, start_client

import duckdb_sem
from duckdb_sem.data import dataset_path

pytestmark = [pytest.mark.integration, pytest.mark.model, pytest.mark.slow]

TEMPLATE = "The review {0} is positive"


def test_real_model_behind_one_sidecar_for_many_processes_and_connections(tmp_path: Path) -> None:
    with open(dataset_path("rt_reviews.csv"), newline="", encoding="utf-8") as handle:
        texts = [row["text"] for row in csv.DictReader(handle)][:10]
    rnd = random.Random(3)
    plans = [[rnd.sample(texts, 4) for _ in range(2)] for _ in range(3)]  # 3 procs x 2 conns
    cache = tmp_path / "c.sqlite"
    with sidecar("--backend", "llama:", "--policy", "srtf", cache=cache) as (url, _):
        procs = [start_client(url, "llama:", plan, TEMPLATE) for plan in plans]
        outputs = [client_results(p, timeout=900) for p in procs]
        usage = httpx.get(f"{url}/v1/status").json()["usage"]
    reference_con = duckdb_sem.connect(backend="llama:", cache="off")
    unique = sorted({t for plan in plans for rows in plan for t in rows})
    reference_con.execute("CREATE TABLE t AS SELECT unnest($1) AS text", [unique])
    expected = dict(
        reference_con.sql(f"SELECT text, sem_filter('{TEMPLATE}', text) FROM t").fetchall()
    )
    for plan, out in zip(plans, outputs, strict=True):
        assert out["errors"] == []
        results = out["results"]
        assert isinstance(results, dict)
        for k, rows in enumerate(plan):
            got = dict(results[str(k)])
            assert sorted(got) == sorted(rows)
            assert got == {t: expected[t] for t in rows}
    assert usage["physical_calls"] == len(unique)
    assert usage["virtual_calls"] == sum(len(rows) for plan in plans for rows in plan)
