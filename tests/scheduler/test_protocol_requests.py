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


def test_rows_of_different_shapes_in_one_seu_keep_their_own_shape() -> None:
    # the decoder builds what an SEU's rows share once: rows that differ in anything but the
    # row text must still come back different
    requests = (
        build_request(OperatorKind.MAP, "a", max_tokens=8),
        build_request(OperatorKind.MAP, "b", max_tokens=9),
        build_request(OperatorKind.MAP, "c", max_tokens=8, output_type="INTEGER"),
        build_request(OperatorKind.FILTER, "d"),
        build_request(OperatorKind.MAP, "e", max_tokens=8),
    )
    back = decode_seu(encode_seu(SEU("q", "op", requests, 1.0)))
    assert back.requests == requests
    assert back.requests[0].output is back.requests[4].output  # built once, shared
