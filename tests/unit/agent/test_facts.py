"""Facts probe against fixture roots: parsed files, absent sources with reasons, simulation."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from agent.cli import cli
from agent.facts import probe_facts


def fixture_root(tmp_path: Path, *, jetson: bool = False) -> Path:
    (tmp_path / "etc").mkdir()
    (tmp_path / "proc").mkdir()
    (tmp_path / "etc/os-release").write_text(
        'NAME="Ubuntu"\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\nID=ubuntu\n'
    )
    (tmp_path / "proc/cpuinfo").write_text(
        "processor\t: 0\nmodel name\t: ARMv8 Processor rev 1 (v8l)\n\n"
        "processor\t: 1\nmodel name\t: ARMv8 Processor rev 1 (v8l)\n"
    )
    if jetson:
        (tmp_path / "etc/nv_tegra_release").write_text("# R36 (release), REVISION: 4.3\n")
    return tmp_path


def test_files_are_read_below_the_root(tmp_path: Path) -> None:
    facts = probe_facts(fixture_root(tmp_path))
    assert facts.os == "Ubuntu 22.04.4 LTS"
    assert facts.cpu_model == "ARMv8 Processor rev 1 (v8l)"
    assert facts.cpu_count is not None
    assert facts.cpu_count >= 1
    assert facts.memory_total_bytes is not None
    assert facts.memory_total_bytes > 0
    assert facts.sources["os_release"].available
    assert facts.sources["psutil"].available


def test_no_jetson_files_means_sources_say_why(tmp_path: Path) -> None:
    facts = probe_facts(fixture_root(tmp_path))
    assert facts.jetson is None
    assert facts.gpu is None
    assert not facts.simulated
    jetson = facts.sources["jetson"]
    assert not jetson.available
    assert jetson.reason == f"{tmp_path}/etc/nv_tegra_release not found: not a Jetson"
    assert facts.sources["tensorrt"].reason == (
        "tensorrt not importable: No module named 'tensorrt'"
    )
    assert not facts.sources["nvml"].available
    assert "not probed yet" in (facts.sources["nvml"].reason or "")


def test_jetson_release_file_is_noticed_but_not_invented(tmp_path: Path) -> None:
    facts = probe_facts(fixture_root(tmp_path, jetson=True))
    assert facts.jetson is None
    assert "found but Jetson probing is not implemented" in (facts.sources["jetson"].reason or "")


def test_empty_root_falls_back_and_says_why(tmp_path: Path) -> None:
    facts = probe_facts(tmp_path)
    assert facts.os
    assert not facts.sources["os_release"].available


def test_simulated_profile_overlays_hardware_and_keeps_host_facts(tmp_path: Path) -> None:
    real = probe_facts(fixture_root(tmp_path))
    sim = probe_facts(tmp_path, simulated_profile="orin-nx-16gb")
    assert sim.simulated
    assert sim.profile == "orin-nx-16gb"
    assert sim.jetson is not None
    assert (sim.jetson.jetpack, sim.jetson.l4t, sim.jetson.power_mode) == ("6.1", "36.4.0", "25W")
    assert (sim.jetson.part_number, sim.jetson.dla_cores) == ("p3767-0000", 2)
    assert (sim.os, sim.arch, sim.cpu_model) == (real.os, real.arch, real.cpu_model)
    assert "simulated profile 'orin-nx-16gb'" in (sim.sources["jetson"].reason or "")
    rtx = probe_facts(tmp_path, simulated_profile="x86-rtx")
    assert rtx.gpu is not None
    assert rtx.gpu.name == "NVIDIA RTX A2000 (simulated)"
    assert rtx.gpu.compute_capability == "8.6"
    assert rtx.jetson is None


def test_probe_json_prints_device_facts(monkeypatch: object) -> None:
    result = CliRunner(env={"JETFLEET_SIMULATED_PROFILE": "orin-nano-8gb"}).invoke(
        cli, ["probe", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["schema"] == "jetfleet/facts/1"
    assert data["profile"] == "orin-nano-8gb"
    assert data["simulated"] is True
    assert data["jetson"]["module"] == "NVIDIA Jetson Orin Nano 8GB"


def test_probe_table_lists_sources_with_reasons() -> None:
    result = CliRunner().invoke(cli, ["probe"])
    assert result.exit_code == 0, result.output
    assert "arch" in result.output
    assert "jetson" in result.output
    assert "absent:" in result.output
