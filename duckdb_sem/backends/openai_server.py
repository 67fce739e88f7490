"""What an OpenAI-compatible server is, and the extras it exports beside the chat API.

The API key comes from ``DUCKDB_SEM_OPENAI_API_KEY``, else ``OPENAI_API_KEY`` (or a variable
named by the spec), and an HTTP 401/403 says so (:func:`check_status`). The model and the
server kind come from ``/v1/models``, whose ``owned_by`` names the server (:func:`discover`):
``vllm`` is vLLM, ``me`` llama-cpp-python's server, ``duckdb-sem-sim`` the sim server, anything
else is generic. vLLM and the sim server export their queue gauges on Prometheus ``/metrics``
(:func:`scrape_load`); they and llama.cpp count tokens on a tokenizer route
(:func:`server_token_count`).

Example: a ``/metrics`` body with ``vllm:num_requests_running{model_name="m"} 3.0`` and
``vllm:num_requests_waiting 5`` reads as ``Load(queued=5, running=3)``.
"""

from __future__ import annotations

import os
import re

import httpx

from duckdb_sem.backends.base import Load
from duckdb_sem.errors import BackendError, BackendUnavailableError, ConfigError

__all__ = [
    "API_KEY_ENV",
    "check_status",
    "discover",
    "key_from_env",
    "parse_gauges",
    "scrape_load",
    "server_token_count",
]

API_KEY_ENV = ("DUCKDB_SEM_OPENAI_API_KEY", "OPENAI_API_KEY")
# server kind -> (tokenizer route, field holding the text)
_TOKENIZE = {
    "vllm": ("/tokenize", "prompt"),
    "sim": ("/tokenize", "prompt"),
    "llama.cpp": ("/extras/tokenize/count", "input"),
}
_OWNERS = {"vllm": "vllm", "duckdb-sem-sim": "sim", "me": "llama.cpp"}
_METRIC = re.compile(r"^vllm:num_requests_(running|waiting)(?:\{[^}]*\})?\s+([0-9.eE+-]+)$")


def key_from_env(name: str | None = None) -> str | None:
    """The API key from the variable ``name``, else from the first set of :data:`API_KEY_ENV`."""
    for var in (name,) if name else API_KEY_ENV:
        value = os.environ.get(var)
        if value:
            return value
    return None


def check_status(resp: httpx.Response, spec: str) -> None:
    """Raise for an error status: a rejected key names the key variables."""
    if resp.status_code in (401, 403):
        raise BackendUnavailableError(
            f"{spec}: the server rejected the API key (HTTP {resp.status_code}); set "
            f"{API_KEY_ENV[0]} (or {API_KEY_ENV[1]}) to a key it accepts"
        )
    if resp.status_code >= 400:
        raise BackendError(f"{spec}: HTTP {resp.status_code} from {resp.url}: {resp.text[:300]}")


def discover(http: httpx.Client, base_url: str, model: str | None, *, spec: str) -> tuple[str, str]:
    """(model, server kind) from ``/v1/models``; ``model`` None means the only one served."""
    try:
        resp = http.get(base_url + "/models")
    except httpx.TransportError as err:
        msg = f"cannot reach {base_url} ({err}); start the server or fix {spec!r}"
        raise BackendUnavailableError(msg) from None
    check_status(resp, spec)
    served = resp.json().get("data") or []
    names = [str(m.get("id")) for m in served]
    owners = {str(m.get("id")): str(m.get("owned_by", "")) for m in served}
    if model is None:
        if len(names) != 1:
            raise ConfigError(f"{spec}: name the model with ?model=; the server serves {names}")
        model = names[0]
    elif model not in names:
        raise ConfigError(
            f"{spec}: model {model!r} is not served at {base_url}; it serves "
            f"{', '.join(names) or 'nothing'}"
        )
    return model, _OWNERS.get(owners.get(model, ""), "generic")


def scrape_load(http: httpx.Client, root: str) -> Load:
    """The server's queue gauges from ``root/metrics``; raises ``httpx.HTTPError``/``ValueError``."""
    resp = http.get(root + "/metrics")
    resp.raise_for_status()
    return parse_gauges(resp.text)


def parse_gauges(text: str) -> Load:
    """vLLM's ``num_requests_running|waiting`` gauges, summed over labels, as a :class:`Load`."""
    values = {"waiting": 0.0, "running": 0.0}
    for line in text.splitlines():
        match = _METRIC.match(line.strip())
        if match:
            values[match.group(1)] += float(match.group(2))
    return Load(queued=int(values["waiting"]), running=int(values["running"]))


def server_token_count(
    http: httpx.Client, root: str, *, kind: str, model: str, text: str
) -> int | None:
    """Tokens of ``text`` by the server's tokenizer; None when ``kind`` of server has none.

    Raises ``httpx.HTTPError``, ``KeyError`` or ``ValueError`` when the route fails.
    """
    route = _TOKENIZE.get(kind)
    if route is None:
        return None
    body = {"model": model, route[1]: text}
    return int(http.post(root + route[0], json=body).json()["count"])
