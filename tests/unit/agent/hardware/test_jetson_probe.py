from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.hardware.jetson import (
    DPKG_L4T_CORE,
    JETSON_CLOCKS_SHOW,
    NOT_A_JETSON,
    NVPMODEL_QUERY,
    SOURCES,
    probe_jetson,
)
from shared.facts import JetsonFacts
from tests.unit.agent.hardware.devices import JETSONS, X86, ReplayRunner, device_root


@dataclass(frozen=True)
class Expected:
    facts: JetsonFacts
    absent: tuple[str, ...]


EXPECTED = {
    "orin-nano-8gb": Expected(
        JetsonFacts(
            module="Jetson Orin Nano 8GB",
            part_number="p3767-0003",
            soc="tegra234",
            l4t="36.4.3",
            jetpack="6.2",
            power_mode="15W",
            power_mode_id=0,
            jetson_clocks=False,
            dla_cores=0,
        ),
        absent=("jtop",),
    ),
    "orin-nx-16gb": Expected(
        JetsonFacts(
            module="Jetson Orin NX 16GB",
            part_number="p3767-0000",
            soc="tegra234",
            l4t="36.4.0",
            jetpack="6.1",
            power_mode="MAXN",
            power_mode_id=0,
            jetson_clocks=True,
            dla_cores=2,
        ),
        absent=("jtop",),
    ),
    "agx-orin-64gb": Expected(
        JetsonFacts(
            module="Jetson AGX Orin 64GB",
            part_number="p3701-0005",
            soc="tegra234",
            l4t="35.3.1",
            jetpack="5.1.1",
            power_mode="MAXN",
            power_mode_id=0,
            jetson_clocks=None,
            dla_cores=2,
        ),
        absent=("jetson_clocks", "jtop"),
    ),
    "xavier-nx": Expected(
        JetsonFacts(
            module="Jetson Xavier NX (devkit)",
            part_number="p3668-0000",
            soc="tegra194",
            l4t="35.4.1",
            jetpack="5.1.2",
            power_mode="MODE_20W_6CORE",
            power_mode_id=8,
            jetson_clocks=None,
            dla_cores=2,
        ),
        absent=("dpkg", "jetson_clocks", "jtop"),
    ),
}


@pytest.mark.parametrize("device", JETSONS)
def test_jetson_facts_from_a_board(device: str) -> None:
    expected = EXPECTED[device]
    probe = probe_jetson(device_root(device), ReplayRunner(device))
    assert probe.facts == expected.facts
    assert set(probe.sources) == set(SOURCES)
    absent = tuple(name for name in SOURCES if not probe.sources[name].available)
    assert absent == expected.absent
    for name in absent:
        assert probe.sources[name].reason


def test_a_missing_tool_is_absent_with_the_runners_reason() -> None:
    probe = probe_jetson(device_root("agx-orin-64gb"), ReplayRunner("agx-orin-64gb"))
    assert (
        probe.sources["jetson_clocks"].reason == "jetson_clocks not installed (not found on PATH)"
    )


def test_a_missing_l4t_package_quotes_dpkg() -> None:
    probe = probe_jetson(device_root("xavier-nx"), ReplayRunner("xavier-nx"))
    reason = probe.sources["dpkg"].reason or ""
    assert "no packages found matching nvidia-l4t-core" in reason


def test_jtop_is_absent_with_a_reason_when_its_service_socket_is_missing() -> None:
    probe = probe_jetson(device_root("orin-nano-8gb"), ReplayRunner("orin-nano-8gb"))
    reason = probe.sources["jtop"].reason or ""
    assert "jetson-stats not installed" in reason or "jtop.sock missing" in reason


def test_dpkg_supplies_l4t_when_the_release_file_is_missing() -> None:
    root = device_root("orin-nx-16gb")
    assert not (root / "etc" / "nv_tegra_release").exists()
    probe = probe_jetson(root, ReplayRunner("orin-nx-16gb"))
    assert probe.facts is not None
    assert probe.facts.l4t == "36.4.0"


def test_the_release_file_wins_over_dpkg() -> None:
    runner = ReplayRunner("orin-nano-8gb")
    runner.answers[" ".join(DPKG_L4T_CORE)] = (0, "36.4.4-20250616085344")
    probe = probe_jetson(device_root("orin-nano-8gb"), runner)
    assert probe.facts is not None
    assert probe.facts.l4t == "36.4.3"


def test_unrecognised_nvpmodel_output_is_absent_with_what_it_printed() -> None:
    runner = ReplayRunner("orin-nano-8gb")
    runner.answers[" ".join(NVPMODEL_QUERY)] = (0, "NVPM VERB: Current mode: unknown\n")
    probe = probe_jetson(device_root("orin-nano-8gb"), runner)
    assert probe.facts is not None
    assert probe.facts.power_mode is None
    assert probe.sources["nvpmodel"].reason == (
        "`nvpmodel -q` printed something unrecognised: 'NVPM VERB: Current mode: unknown'"
    )


def test_jetson_clocks_needing_root_is_reported() -> None:
    runner = ReplayRunner("orin-nano-8gb")
    runner.answers[" ".join(JETSON_CLOCKS_SHOW)] = (1, "Error: run jetson_clocks as root\n")
    probe = probe_jetson(device_root("orin-nano-8gb"), runner)
    assert probe.facts is not None
    assert probe.facts.jetson_clocks is None
    assert probe.sources["jetson_clocks"].reason == (
        "`jetson_clocks --show` exited 1: Error: run jetson_clocks as root"
    )


def test_an_unlisted_module_is_named_by_its_device_tree_model(tmp_path: Path) -> None:
    root = tmp_path
    tree = root / "proc" / "device-tree"
    tree.mkdir(parents=True)
    (tree / "model").write_bytes(b"NVIDIA Jetson Xavier NX Developer Kit (eMMC)\0")
    (tree / "compatible").write_bytes(b"nvidia,p3509-0000+p3668-0001\0nvidia,tegra194\0")
    probe = probe_jetson(root, ReplayRunner("plain-x86"))
    assert probe.facts is not None
    assert probe.facts.module == "NVIDIA Jetson Xavier NX Developer Kit (eMMC)"
    assert probe.facts.part_number == "p3668-0001"
    assert probe.facts.dla_cores is None
    assert probe.sources["nvpmodel"].reason == "nvpmodel not installed (not found on PATH)"


@pytest.mark.parametrize("device", X86)
def test_an_x86_host_is_not_a_jetson_and_runs_no_jetson_tool(device: str) -> None:
    runner = ReplayRunner(device)
    probe = probe_jetson(device_root(device), runner)
    assert probe.facts is None
    assert probe.sources["jetson"].reason == NOT_A_JETSON
    for name in ("nvpmodel", "jetson_clocks", "jtop"):
        assert probe.sources[name].reason == "skipped: not a Jetson"
    assert runner.calls == [DPKG_L4T_CORE]
