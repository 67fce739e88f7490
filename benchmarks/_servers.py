"""Servers a benchmark starts as processes of their own: a free port, and waiting for one to
answer."""

from __future__ import annotations

import socket
import time

import httpx

__all__ = ["free_port", "wait_http"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, *, tries: int = 100) -> None:
    """Until ``url`` answers 200 (a try every 0.2 s at most); SystemExit when it never does."""
    for _ in range(tries):
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{url} did not answer")
