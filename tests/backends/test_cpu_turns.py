"""CPU turns across real processes: never two evaluations at once, fair, nothing stuck."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from duckdb_sem.backends import cpu_turns
from duckdb_sem.backends.registry import create_backend
from duckdb_sem.errors import ConfigError
from duckdb_sem.llm.request import LLMRequest, OperatorKind, OutputSpec

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

# A child that takes `turns` turns of `hold` seconds each and prints when it held them.
_CHILD = textwrap.dedent(
    """
    import json, sys, time
    from duckdb_sem.backends.cpu_turns import cpu_turn
    turns, hold = int(sys.argv[1]), float(sys.argv[2])
    print("ready", flush=True)
    sys.stdin.readline()  # start together
    spans = []
    for _ in range(turns):
        with cpu_turn():
            if hold >= 1:  # a long holder says when it holds the turn
                print("holding", flush=True)
            start = time.monotonic()
            time.sleep(hold)
            spans.append((start, time.monotonic()))
    print(json.dumps(spans), flush=True)
    """
)


def _children(tmp_path: Path, n: int, turns: int, hold: float) -> list[subprocess.Popen[str]]:
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(turns), str(hold)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(n)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return procs


def _spans(procs: list[subprocess.Popen[str]]) -> list[list[tuple[float, float]]]:
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    out = []
    for proc in procs:
        stdout, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        out.append([tuple(s) for s in json.loads(stdout.strip().splitlines()[-1])])
    return out


def test_processes_never_evaluate_at_once_and_take_turns(tmp_path: Path) -> None:
    spans = _spans(_children(tmp_path, 3, turns=12, hold=0.01))
    every = sorted((start, end, who) for who, mine in enumerate(spans) for start, end in mine)
    for (_, end, _), (start, _, _) in itertools.pairwise(every):
        assert start >= end, "two processes held the CPU turn at once"
    # fair: while others wait, no process takes many turns in a row
    longest = run = 1
    for (_, _, a), (_, _, b) in itertools.pairwise(every):
        run = run + 1 if a == b else 1
        longest = max(longest, run)
    assert longest <= 3, f"one process took {longest} turns in a row while others waited"


def test_a_killed_holder_leaves_nothing_stuck(tmp_path: Path) -> None:
    holder = _children(tmp_path, 1, turns=1, hold=60)[0]
    assert holder.stdin is not None
    holder.stdin.write("go\n")
    holder.stdin.flush()
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "holding"  # not a sleep: a loaded machine is late
    waiter = _children(tmp_path, 1, turns=1, hold=0)
    assert waiter[0].stdin is not None
    waiter[0].stdin.write("go\n")
    waiter[0].stdin.flush()
    time.sleep(0.5)
    assert waiter[0].poll() is None, "the waiter got a turn the holder held"
    os.kill(holder.pid, signal.SIGKILL)
    holder.communicate(timeout=10)  # waits, and closes its pipes
    waiter[0].communicate(timeout=10)
    assert waiter[0].returncode == 0


def test_turns_nest_in_a_thread_and_serialise_threads() -> None:
    with cpu_turns.cpu_turn(), cpu_turns.cpu_turn():  # reentrant: no deadlock
        pass
    inside = 0
    most = 0
    guard = threading.Lock()

    def work() -> None:
        nonlocal inside, most
        for _ in range(20):
            with cpu_turns.cpu_turn(shared=False):
                with guard:
                    inside += 1
                    most = max(most, inside)
                time.sleep(0.001)
                with guard:
                    inside -= 1

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most == 1


def test_the_lock_files_are_private_to_the_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    folder = cpu_turns.lock_dir()
    assert folder.parent == tmp_path and folder.stat().st_mode & 0o077 == 0


def test_share_cpu_is_an_on_off_option() -> None:
    with pytest.raises(ConfigError, match="share_cpu='maybe' must be on or off"):
        create_backend("llama:?share_cpu=maybe")


@pytest.mark.model
def test_the_embedded_model_takes_one_turn_a_row() -> None:
    backend = create_backend("llama:?share_cpu=on")
    rows = ["a great film", "a dull film", "fine"]
    requests = [
        LLMRequest(OperatorKind.FILTER, "Is it positive?", row, OutputSpec.decision())
        for row in rows
    ]
    before = cpu_turns.turn_count()
    answers = backend.complete(requests)
    assert len(answers) == 3 and all(a.error is None for a in answers)
    assert cpu_turns.turn_count() - before >= len(rows)
    off = create_backend("llama:?share_cpu=off")
    before = cpu_turns.turn_count()
    off.complete(requests[:1])
    assert cpu_turns.turn_count() == before
