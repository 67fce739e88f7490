"""Give memory a finished session freed back to the operating system.

Each wire session is a thread, and glibc gives threads malloc arenas of their own that keep
what they freed: the server's idle RSS crept from 190 to 330 MB over a dozen connections, one
after another (``benchmarks/results/pgwire_stream.md``). ``malloc_trim(0)`` when a session
ends returns the free pages of every arena (a few milliseconds), so idle memory follows the
sessions that are open, not the ones that were. Not glibc: nothing to do.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

__all__ = ["release_freed_memory"]


@functools.cache
def _trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


def release_freed_memory() -> None:
    """Return the free pages of every malloc arena to the operating system (glibc only)."""
    trim = _trim()
    if trim is not None:
        trim(0)
