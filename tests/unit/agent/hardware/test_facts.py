"""Facts probe on fixture roots: host files, hardware sources with reasons, simulation, runtime."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent.cli import cli
from agent.errors import SettingsError
from agent.hardware.facts import probe, probe_facts
from tests.unit.agent.hardware.devices import ReplayRunner, device_root


def fixture_root(tmp_path: Path, device: str | None = None) -> Path:
    if device is not None:
        shutil.copytree(device_root(device), tmp_path, dirs_exist_ok=True)
    (tmp_path / "etc").mkdir(exist_ok=True)
    (tmp_path / "proc").mkdir(exist_ok=True)
    (tmp_path / "etc/os-release").write_text(
        'NAME="Ubuntu"\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\nID=ubuntu\n'
    )
    (tmp_path / "proc/cpuinfo").write_text(
        "processor\t: 0\nmodel name\t: ARMv8 Processor rev 1 (v8l)\n\n"
        "processor\t: 1\nmodel name\t: ARMv8 Processor rev 1 (v8l)\n"
    )
    return tmp_path


def test_files_are_read_below_the_root(tmp_path: Path) -> None:
    facts = probe_facts(fixture_root(tmp_path), run=ReplayRunner("plain-x86"))
    assert facts.os == "Ubuntu 22.04.4 LTS"
    assert facts.cpu_model == "ARMv8 Processor rev 1 (v8l)"
    assert facts.cpu_count is not None
    assert facts.cpu_count >= 1
    assert facts.memory_total_bytes is not None
    assert facts.memory_total_bytes > 0
    assert facts.sources["os_release"].available
    assert facts.sources["psutil"].available


def test_no_jetson_and_no_tensorrt_means_sources_say_why(tmp_path: Path) -> None:
    facts = probe_facts(fixture_root(tmp_path), run=ReplayRunner("plain-x86"))
    assert facts.jetson is None
    assert not facts.simulated
    assert facts.tensorrt_version is None
    jetson = facts.sources["jetson"]
    assert not jetson.available
    assert (jetson.reason or "").startswith("not a Jetson")
    assert "TensorRT not importable" in (facts.sources["tensorrt"].reason or "")
    assert "run with runtime onnxruntime" in (facts.sources["tensorrt"].reason or "")
    assert facts.sources["nvpmodel"].reason == "skipped: not a Jetson"


def test_jetson_fixture_tree_gives_module_jetpack_and_power_mode(tmp_path: Path) -> None:
    root = fixture_root(tmp_path, "orin-nano-8gb")
    facts = probe_facts(root, run=ReplayRunner("orin-nano-8gb"))
    assert facts.jetson is not None
    assert facts.jetson.jetpack == "6.2"
    assert facts.jetson.l4t == "36.4.3"
    assert (facts.jetson.power_mode, facts.jetson.power_mode_id) == ("15W", 0)
    assert facts.jetson.jetson_clocks is False
    assert facts.sources["jetson"].available
    assert facts.gpu is not None
    assert facts.gpu.compute_capability == "8.7"


def test_empty_root_falls_back_and_says_why(tmp_path: Path) -> None:
    facts = probe_facts(tmp_path, run=ReplayRunner("plain-x86"))
    assert facts.os
    assert not facts.sources["os_release"].available


def test_simulated_profile_overlays_hardware_and_keeps_host_facts(tmp_path: Path) -> None:
    real = probe_facts(fixture_root(tmp_path), run=ReplayRunner("plain-x86"))
    sim = probe_facts(tmp_path, simulated_profile="orin-nx-16gb", run=ReplayRunner("plain-x86"))
    assert sim.simulated
    assert sim.profile == "orin-nx-16gb"
    assert sim.jetson is not None
    assert (sim.jetson.jetpack, sim.jetson.l4t, sim.jetson.power_mode) == ("6.1", "36.4.0", "25W")
    assert (sim.jetson.part_number, sim.jetson.dla_cores) == ("p3767-0000", 2)
    assert (sim.os, sim.arch, sim.cpu_model) == (real.os, real.arch, real.cpu_model)
    assert "simulated profile 'orin-nx-16gb'" in (sim.sources["jetson"].reason or "")
    assert "simulated profile" in (sim.sources["tensorrt"].reason or "")
    rtx = probe_facts(tmp_path, simulated_profile="x86-rtx", run=ReplayRunner("plain-x86"))
    assert rtx.gpu is not None
    assert rtx.gpu.name == "NVIDIA RTX A2000 (simulated)"
    assert rtx.gpu.compute_capability == "8.6"
    assert rtx.jetson is None


def test_a_simulated_jetson_on_a_cpu_host_still_runs_onnxruntime(tmp_path: Path) -> None:
    probed = probe(tmp_path, simulated_profile="orin-nano-8gb", run=ReplayRunner("plain-x86"))
    assert probed.facts.tensorrt_version == "10.3.0"
    assert probed.runtime == "onnxruntime"
    assert "TensorRT not importable" in probed.runtime_reason
    assert "simulated profile does not change the runtime" in probed.runtime_reason


def test_forcing_tensorrt_without_it_is_a_settings_error_naming_the_fix(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="set runtime auto"):
        probe(tmp_path, runtime="tensorrt", run=ReplayRunner("plain-x86"))


def test_probe_json_prints_device_facts_and_the_runtime() -> None:
    result = CliRunner(
        env={"JETFLEET_SIMULATED_PROFILE": "orin-nano-8gb", "JETFLEET_RUNTIME": "onnxruntime"}
    ).invoke(cli, ["probe", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["schema"] == "jetfleet/facts/1"
    assert data["profile"] == "orin-nano-8gb"
    assert data["simulated"] is True
    assert data["jetson"]["module"] == "NVIDIA Jetson Orin Nano 8GB"
    assert data["runtime"] == "onnxruntime"
    assert data["runtime_reason"].startswith("runtime = onnxruntime in the agent settings")


def test_probe_table_lists_runtime_and_sources_with_reasons() -> None:
    result = CliRunner(env={"JETFLEET_RUNTIME": "auto"}).invoke(cli, ["probe"])
    assert result.exit_code == 0, result.output
    assert "arch" in result.output
    assert "runtime              onnxruntime (" in result.output
    assert "absent:" in result.output


def test_probe_with_tensorrt_forced_on_a_cpu_host_exits_2_with_the_fix() -> None:
    result = CliRunner(env={"JETFLEET_RUNTIME": "tensorrt"}).invoke(cli, ["probe"])
    assert result.exit_code == 2
    assert "invalid setting runtime: tensorrt was requested but" in result.output
