"""The llama.cpp build probe: a build that crashes on this CPU is an error naming the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from duckdb_sem.backends import llama_probe
from duckdb_sem.errors import BackendUnavailableError

CRASH = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llama_probe, "default_cache_path", lambda: tmp_path / "llm_cache.sqlite")
    monkeypatch.setattr(llama_probe, "_checked", set())


def test_a_build_that_crashes_is_an_error_with_the_rebuild_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(llama_probe, "_PROBE", CRASH)
    with pytest.raises(BackendUnavailableError) as err:
        llama_probe.check_llama_build(tmp_path / "model.gguf")
    assert "SIGSEGV" in str(err.value)
    assert llama_probe.REBUILD_COMMAND in str(err.value)
    assert not list(tmp_path.glob("llama-probe-*.ok"))  # a failure is never remembered


def test_a_build_that_runs_is_probed_once_per_machine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    monkeypatch.setattr(llama_probe, "_PROBE", f"open({str(runs)!r}, 'a').write('x')")
    llama_probe.check_llama_build(tmp_path / "model.gguf")
    assert runs.read_text() == "x"
    assert len(list(tmp_path.glob("llama-probe-*.ok"))) == 1
    monkeypatch.setattr(llama_probe, "_checked", set())  # a new process: the marker answers
    llama_probe.check_llama_build(tmp_path / "model.gguf")
    assert runs.read_text() == "x"


def test_an_error_exit_is_left_to_the_real_load(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(llama_probe, "_PROBE", "raise SystemExit(3)")
    llama_probe.check_llama_build(tmp_path / "missing.gguf")  # no error: the load reports it


def test_scripts_install_builds_with_the_flags_the_error_names() -> None:
    script = (Path(__file__).resolve().parents[2] / "scripts" / "install").read_text()
    assert f'safe="{llama_probe.SAFE_CMAKE_ARGS}"' in script
