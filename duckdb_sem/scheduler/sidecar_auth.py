"""Who may talk to a sidecar, and whose queries each caller sees and cancels.

A sidecar with tokens (every TCP ``duckdb-sem serve``; a unix one given ``--token``) answers
no request without one, ``Authorization: Bearer TOKEN`` (or HTTP Basic with the token as the
password, as ``http://:TOKEN@host:port`` makes curl and httpx send), with 401:

- the **client** token lets a process submit SEUs and see, cancel and finish its own queries;
- the **operator** token sees and cancels every client's queries (``duckdb-sem top``).

A client names itself with a random session token of its own (``X-Sem-Session``, one per
:class:`~.sidecar_client.SidecarClient`, never shown). The sidecar files the client's queries
under a label derived from it, ``LABEL/QUERY_ID``: a client's status lists only its own
queries (labels stripped), and whatever query id it cancels, the cancel reaches only its own.
The operator sees the labelled ids and cancels one by its labelled id.

Example:
    >>> tokens = SidecarTokens(client="c", operator="o")
    >>> caller = tokens.caller("Bearer c", "my-session")
    >>> caller is not None and caller.inside("q1").endswith("/q1"), caller.operator
    (True, False)
    >>> tokens.caller("Bearer wrong", "my-session") is None
    True
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import urllib.parse
from dataclasses import dataclass, replace

from duckdb_sem.scheduler.seu import SEU

__all__ = ["SESSION_HEADER", "Caller", "SidecarTokens", "split_token", "visible_status"]

#: the header that carries a client's session token
SESSION_HEADER = "x-sem-session"


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated request's caller: its role, and the label its queries are filed under
    (None: it sent no session token, so it has no queries)."""

    operator: bool
    label: str | None

    def inside(self, query_id: str) -> str:
        """The sidecar's id of the caller's query ``query_id``."""
        return f"{self.label}/{query_id}"

    def target(self, query_id: str) -> str:
        """The query a cancel or finish of ``query_id`` reaches: the caller's own, or for the
        operator a labelled id as its status shows it."""
        if self.operator and "/" in query_id:
            return query_id
        return self.inside(query_id)

    def own(self, seu: SEU) -> SEU:
        return replace(seu, query_id=self.inside(seu.query_id))


@dataclass(frozen=True, slots=True)
class SidecarTokens:
    client: str
    operator: str

    def __post_init__(self) -> None:
        if not self.client or not self.operator or self.client == self.operator:
            raise ValueError("a sidecar needs a client and an operator token, not equal")

    @staticmethod
    def make(client: str | None = None, operator: str | None = None) -> SidecarTokens:
        """These tokens, each generated (32 random bytes, URL-safe) where not given."""
        return SidecarTokens(
            client=client or secrets.token_urlsafe(32),
            operator=operator or secrets.token_urlsafe(32),
        )

    def caller(self, authorization: str, session: str) -> Caller | None:
        """Who sent a request with these headers; None: no token, or not one of ours."""
        token = _token_of(authorization)
        if token is None:
            return None
        label = hashlib.sha256(session.encode()).hexdigest()[:12] if session else None
        # both compared, in constant time: the answer's timing tells nothing about either
        is_operator = hmac.compare_digest(token.encode(), self.operator.encode())
        is_client = hmac.compare_digest(token.encode(), self.client.encode())
        if not (is_operator or is_client):
            return None
        return Caller(operator=is_operator, label=label)


def _token_of(authorization: str) -> str | None:
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() == "bearer":
        return value.strip() or None
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return None
        user, _, password = decoded.partition(":")
        return password or user or None
    return None


def split_token(url: str) -> tuple[str, str]:
    """``url`` without its token, and the token (``""``: none): ``http://:TOKEN@host:port``,
    ``http://TOKEN@host:port`` or a ``token=`` query parameter.

    Example:
        >>> split_token("http://:s3cret@127.0.0.1:7300")
        ('http://127.0.0.1:7300', 's3cret')
        >>> split_token("unix:///tmp/s.sock?token=s3cret")
        ('unix:///tmp/s.sock', 's3cret')
    """
    parts = urllib.parse.urlsplit(url)
    token = urllib.parse.unquote(parts.password or parts.username or "")
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    token = next((v for k, v in query if k == "token"), token)
    rest = urllib.parse.urlencode([(k, v) for k, v in query if k != "token"])
    if not token:
        return url, ""
    netloc = parts.netloc.rpartition("@")[2]
    bare = urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=rest))
    if not netloc and url.startswith(f"{parts.scheme}://"):  # unix:///path keeps its //
        bare = bare.replace(":", "://", 1)
    return bare, token


def visible_status(status: dict[str, object], caller: Caller | None) -> dict[str, object]:
    """The part of a status snapshot ``caller`` may see: every query for the operator (and
    for a sidecar without tokens, ``caller`` None), its own queries, labels stripped, for a
    client. Totals (queue length, usage, replicas) are everyone's."""
    if caller is None or caller.operator:
        return status
    prefix = f"{caller.label}/" if caller.label is not None else None
    queries = status.get("queries")
    mine: list[object] = []
    if prefix is not None and isinstance(queries, list):
        for query in queries:
            query_id = str(query.get("query_id", ""))
            if query_id.startswith(prefix):
                mine.append({**query, "query_id": query_id.removeprefix(prefix)})
    return {**status, "queries": mine}
