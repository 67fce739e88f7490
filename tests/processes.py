"""Child processes that tests start (servers, sidecars, clients) and must always stop."""

from __future__ import annotations

import subprocess
from typing import Any


def stop(proc: subprocess.Popen[Any], *, timeout: float = 10.0) -> None:
    """Terminate ``proc``, kill it if it has not exited within ``timeout``, close its stderr."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stderr is not None:
        proc.stderr.close()
