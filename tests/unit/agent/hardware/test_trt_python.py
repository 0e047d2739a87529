"""Finding the interpreter that can import TensorRT: real probe children under real interpreters
(this host has no TensorRT, so every answer must say why), the setting, and the facts it fills."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent.cli import cli
from agent.hardware.trt_python import (
    JETPACK_PYTHONS,
    ask,
    candidates,
    discover,
    find_tensorrt_python,
)
from agent.settings import AgentSettings
from agent.trt_host import launch
from shared.facts import DeviceFacts

SYSTEM_PYTHONS = [p for p in JETPACK_PYTHONS if os.path.isfile(p)]


def test_the_agents_own_python_has_no_tensorrt_and_the_answer_says_why() -> None:
    found = discover(None, tried=[sys.executable])
    assert not found.usable
    assert found.interpreter is None
    assert found.python_version == platform.python_version()
    assert found.tensorrt_version is None
    assert found.candidate == sys.executable
    assert found.reason == (
        "no interpreter imports a supported TensorRT; "
        f"{sys.executable}: Python {platform.python_version()}: cannot import tensorrt "
        "(ModuleNotFoundError: No module named 'tensorrt')"
    )


def test_the_search_asks_jetpacks_pythons_then_the_agents_own_and_names_each() -> None:
    assert SYSTEM_PYTHONS, "this host has a /usr/bin/python3"
    asked = candidates(None)
    assert asked[0] == "/usr/bin/python3"
    assert asked[-1] == sys.executable
    real = [os.path.realpath(p) for p in asked[:-1]]
    assert len(real) == len(set(real)), "a system interpreter is asked once, by its real file"
    found = discover(None)
    assert found.interpreter is None
    for path in asked:
        assert f"{path}: Python " in (found.reason or "")
    assert (found.reason or "").count("No module named 'tensorrt'") == len(asked)


def test_a_configured_interpreter_that_does_not_exist_is_the_reason_and_nothing_else_is_tried(
    tmp_path: Path,
) -> None:
    missing = str(tmp_path / "python3.8")
    found = discover(missing)
    assert found.interpreter is None
    assert found.reason == f"tensorrt_python = {missing}: no such file"
    assert found.python_version is None


def test_a_configured_program_that_is_not_python_fails_with_its_exit() -> None:
    found = discover("/bin/true")
    assert (
        found.reason == "tensorrt_python = /bin/true: the probe failed (exit status 0): no output"
    )


def test_the_probe_child_reports_python_cuda_and_leaves_no_directory_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the directories this probe made (other tests running in parallel probe too)
    made: list[str] = []
    mkdtemp = tempfile.mkdtemp

    def recorded(*args: Any, **kwargs: Any) -> str:
        made.append(mkdtemp(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(tempfile, "mkdtemp", recorded)
    answer = ask(sys.executable)
    assert made, "the probe made no directory of its own"
    assert [path for path in made if Path(path).exists()] == []
    assert answer["python"] == platform.python_version()
    assert answer["executable"] == sys.executable
    assert answer["import_error"] == "ModuleNotFoundError: No module named 'tensorrt'"
    assert answer["supported"] is False
    assert answer["runtime_created"] is False
    # no GPU here: libcudart is missing, or present without a driver; either way it says so
    assert answer["cuda_devices"] is None
    assert "CUDA unavailable" in answer["cuda_error"]


def test_the_probe_child_sees_only_agent_trt_host() -> None:
    """Under JetPack's Python 3.8 the rest of the agent (3.10+ code) must not be importable."""
    code = "import importlib.util as u; print(u.find_spec('agent.settings') is None)"
    root = launch.isolated_root()
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=root,
            env={"PYTHONPATH": str(root), "PATH": os.environ.get("PATH", "")},
            capture_output=True,
            text=True,
            check=True,
        )
    finally:
        shutil.rmtree(root)
    assert done.stdout.strip() == "True"
    assert (launch.package_root() / "agent" / "trt_host" / "probe.py").exists()


def test_the_answer_is_cached_per_process_and_setting() -> None:
    first = find_tensorrt_python(None)
    assert find_tensorrt_python(None) is first
    assert find_tensorrt_python("/nonexistent/python3") is not first


def test_the_setting_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JETFLEET_TENSORRT_PYTHON", "/usr/bin/python3.8")
    assert AgentSettings().tensorrt_python == "/usr/bin/python3.8"
    monkeypatch.delenv("JETFLEET_TENSORRT_PYTHON")
    assert AgentSettings().tensorrt_python is None


def test_probe_command_reports_the_configured_interpreters_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = str(tmp_path / "nowhere" / "python3.10")
    monkeypatch.setenv("JETFLEET_TENSORRT_PYTHON", missing)
    monkeypatch.setenv("JETFLEET_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("JETFLEET_RUNTIME", raising=False)
    monkeypatch.delenv("JETFLEET_SIMULATED_PROFILE", raising=False)
    result = CliRunner().invoke(cli, ["probe", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["runtime"] == "onnxruntime"
    assert data["tensorrt_python"] is None
    reason = data["sources"]["tensorrt"]["reason"]
    assert reason.startswith(f"TensorRT not importable (tensorrt_python = {missing}: no such file)")
    assert data["runtime_reason"] == reason


def test_facts_documents_without_the_interpreter_fields_still_validate() -> None:
    old = {"schema": "jetfleet/facts/1", "hostname": "gw", "os": "Ubuntu 20.04", "arch": "aarch64"}
    facts = DeviceFacts.model_validate(old)
    assert facts.tensorrt_python is None
    assert facts.tensorrt_python_version is None
    new = DeviceFacts.model_validate(
        {**old, "tensorrt_python": "/usr/bin/python3.8", "tensorrt_python_version": "3.8.10"}
    )
    assert new.model_dump(mode="json", by_alias=True)["tensorrt_python"] == "/usr/bin/python3.8"
