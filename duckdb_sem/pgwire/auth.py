"""Password authentication: SCRAM-SHA-256 (RFC 5802/7677) as PostgreSQL does it.

Users come from a file of ``name:secret`` lines, where the secret is either a plain password or
a PostgreSQL SCRAM verifier (``SCRAM-SHA-256$4096:<salt>$<StoredKey>:<ServerKey>``, what
``SELECT rolpassword FROM pg_authid`` shows), so the file need not hold plain passwords.
Channel binding is not offered (``SCRAM-SHA-256`` only, not ``-PLUS``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from pathlib import Path

from duckdb_sem.errors import ConfigError

__all__ = ["AuthFailed", "ScramExchange", "Verifier", "load_users", "make_verifier"]

MECHANISM = "SCRAM-SHA-256"
_ITERATIONS = 4096


class AuthFailed(Exception):
    """The client's proof did not match (sent as SQLSTATE 28P01)."""


@dataclass(frozen=True, slots=True)
class Verifier:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def _hmac(key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hashlib.sha256).digest()


def make_verifier(password: str, *, salt: bytes | None = None) -> Verifier:
    salt = salt or secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, _ITERATIONS)
    client_key = _hmac(salted, b"Client Key")
    return Verifier(
        salt, _ITERATIONS, hashlib.sha256(client_key).digest(), _hmac(salted, b"Server Key")
    )


def _parse_secret(secret: str) -> Verifier:
    if not secret.startswith(MECHANISM + "$"):
        return make_verifier(secret)
    try:
        _, params, keys = secret.split("$")
        iterations, salt = params.split(":")
        stored, server = keys.split(":")
        return Verifier(
            base64.b64decode(salt),
            int(iterations),
            base64.b64decode(stored),
            base64.b64decode(server),
        )
    except ValueError as err:
        raise ConfigError(f"malformed SCRAM verifier {secret[:30]!r}...: {err}") from None


def load_users(path: Path) -> dict[str, Verifier]:
    """Read ``name:secret`` lines (``#`` comments and blank lines ignored)."""
    users: dict[str, Verifier] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise ConfigError(f"cannot read users file {path}: {err}") from None
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, secret = line.partition(":")
        if not sep or not name or not secret:
            raise ConfigError(f"{path}:{number}: expected 'name:password', got {line[:40]!r}")
        users[name] = _parse_secret(secret)
    return users


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if sep and len(key) == 1:
            out[key] = value
    return out


class ScramExchange:
    """One server-side SCRAM conversation; ``verifier=None`` fails at the end (no user leak)."""

    def __init__(self, verifier: Verifier | None) -> None:
        self._verifier = verifier or make_verifier(secrets.token_hex(16))
        self._known = verifier is not None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._gs2 = ""

    def server_first(self, client_first: bytes) -> bytes:
        text = client_first.decode("utf-8")
        gs2_flag, _, rest = text.partition(",")
        authzid, _, bare = rest.partition(",")
        if gs2_flag not in {"n", "y"}:
            raise AuthFailed("channel binding is not supported by this server")
        self._gs2 = f"{gs2_flag},{authzid},"
        self._client_first_bare = bare
        client_nonce = _attributes(bare).get("r", "")
        if not client_nonce:
            raise AuthFailed("SCRAM client-first-message has no nonce")
        self._nonce = client_nonce + base64.b64encode(secrets.token_bytes(18)).decode()
        salt = base64.b64encode(self._verifier.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={self._verifier.iterations}"
        return self._server_first.encode()

    def server_final(self, client_final: bytes) -> bytes:
        text = client_final.decode("utf-8")
        attrs = _attributes(text)
        if attrs.get("r") != self._nonce:
            raise AuthFailed("SCRAM nonce mismatch")
        if base64.b64decode(attrs.get("c", "")) != self._gs2.encode():
            raise AuthFailed("SCRAM channel binding data mismatch")
        without_proof = text[: text.rindex(",p=")]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        proof = base64.b64decode(attrs.get("p", ""))
        signature = _hmac(self._verifier.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=False))
        ok = len(proof) == len(signature) and hmac.compare_digest(
            hashlib.sha256(client_key).digest(), self._verifier.stored_key
        )
        if not ok or not self._known:
            raise AuthFailed("password authentication failed")
        server_signature = _hmac(self._verifier.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)
