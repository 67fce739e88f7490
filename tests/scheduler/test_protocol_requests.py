"""The sidecar's wire format keeps everything a request's answer depends on."""

from __future__ import annotations

import json

from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.llm.template import parse_template
from duckdb_sem.scheduler.protocol import decode_seu, encode_seu
from duckdb_sem.scheduler.seu import SEU


def test_template_and_labels_survive_the_wire() -> None:
    rating = parse_template("Rate from 1 to 5: {0}")
    requests = (
        build_request(OperatorKind.FILTER, "plain row"),
        build_request(OperatorKind.FILTER, "Is it good? tea", template=parse_template("Is it good? {0}")),
        build_request(OperatorKind.MAP, "Rate from 1 to 5: tea", output_type="INTEGER", template=rating),
        build_request(OperatorKind.MAP, "Genre? x", labels=("crime", "drama")),
    )  # fmt: skip
    back = decode_seu(encode_seu(SEU("q", "op", requests, 1.0, "c")))
    assert back.requests == requests
    assert [r.signature("b") for r in back.requests] == [r.signature("b") for r in requests]


def test_requests_from_older_clients_still_decode() -> None:
    body = json.loads(encode_seu(SEU("q", "op", (build_request(OperatorKind.FILTER, "r"),), 1.0)))
    body["requests"] = [item[:8] for item in body["requests"]]  # no labels, no template
    (request,) = decode_seu(json.dumps(body).encode()).requests
    assert request.template is None and request.output.labels == ()
