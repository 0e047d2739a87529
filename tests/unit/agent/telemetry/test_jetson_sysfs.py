"""The sysfs/procfs Jetson collector against recorded board trees."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent.telemetry.collectors.jetson_sysfs import (
    JetsonSysfsCollector,
    parse_buddyinfo,
    parse_meminfo,
    thermal_name,
)
from tests.unit.agent.telemetry.boards import JETSONS, ReplayRunner, board_root

MIB = 1 << 20
KIB = 1024


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_orin_nano_reading() -> None:
    runner = ReplayRunner("orin-nano-8gb")
    r = JetsonSysfsCollector(board_root("orin-nano-8gb"), runner, page_size=4096).collect()
    assert r.available, r.reason
    assert r.gpu_load_percent == pytest.approx(34.8)
    assert r.gpu_freq_hz == 624_750_000
    assert r.temperatures_c["gpu"] == pytest.approx(47.093)
    assert r.temperatures_c["tj"] == pytest.approx(48.531)
    assert "cv0" not in r.temperatures_c, "offline zones (-256 C) are not temperatures"
    assert [rail.name for rail in r.rails] == ["VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"]
    assert r.power_total_mw == pytest.approx(5064 * 1208 / 1000)
    assert r.nvmap_used_bytes == 1_325_056 * KIB
    assert r.memory_available_bytes == 4_712_320 * KIB
    assert r.memory_total_bytes == 7_620_184 * KIB
    assert r.free_blocks is not None
    assert (r.free_blocks.lfb_blocks, r.free_blocks.lfb_block_bytes) == (3, 4 * MIB)
    assert (r.power_mode, r.power_mode_id, r.jetson_clocks) == ("15W", 0, False)
    assert r.missing == {}


def test_agx_orin_sums_rails_of_both_monitors_and_skips_unconnected_channels() -> None:
    r = JetsonSysfsCollector(
        board_root("agx-orin-64gb"), ReplayRunner("agx-orin-64gb"), page_size=4096
    ).collect()
    names = [rail.name for rail in r.rails]
    assert names == ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"]
    assert r.power_total_mw == pytest.approx(sum(rail.power_mw for rail in r.rails))
    assert r.gpu_load_percent == pytest.approx(91.2)
    assert r.free_blocks is not None
    assert r.free_blocks.lfb_blocks == 412 + 8901
    assert (r.power_mode, r.jetson_clocks) == ("MAXN", True)


def test_xavier_nx_finds_the_gpu_among_devfreq_nodes_and_sees_fragmentation() -> None:
    r = JetsonSysfsCollector(
        board_root("xavier-nx"), ReplayRunner("xavier-nx"), page_size=4096
    ).collect()
    assert r.gpu_load_percent == pytest.approx(65.5), "the vic node must not be taken for the GPU"
    assert set(r.temperatures_c) == {"ao", "cpu", "gpu", "pll", "aux", "thermal-fan-est"}
    assert r.free_blocks is not None
    assert r.free_blocks.lfb_blocks == 0
    assert r.free_blocks.largest_free_block_bytes == 1 * MIB
    assert (r.power_mode, r.power_mode_id) == ("MODE_20W_6CORE", 8)


def test_a_plain_x86_host_is_not_a_jetson_and_runs_no_tools() -> None:
    runner = ReplayRunner("plain-x86")
    r = JetsonSysfsCollector(board_root("plain-x86"), runner).collect()
    assert not r.available
    assert r.reason is not None
    assert "not a Jetson" in r.reason
    assert runner.calls == []


def test_power_tools_are_rerun_only_after_their_interval() -> None:
    clock = FakeClock()
    runner = ReplayRunner("orin-nano-8gb")
    collector = JetsonSysfsCollector(
        board_root("orin-nano-8gb"), runner, tools_every_s=60.0, clock=clock
    )
    collector.collect()
    clock.now += 59.0
    collector.collect()
    assert len(runner.calls) == 2
    clock.now += 2.0
    assert collector.collect().power_mode == "15W"
    assert len(runner.calls) == 4


def test_missing_tools_and_files_are_named_with_reasons(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(board_root("orin-nano-8gb"), root)
    shutil.rmtree(root / "sys/bus/i2c")
    (root / "proc/buddyinfo").unlink()
    r = JetsonSysfsCollector(root, lambda argv: (127, f"{argv[0]} not installed")).collect()
    assert r.available
    assert r.rails == ()
    assert r.power_total_mw is None
    assert set(r.missing) == {"power", "lfb", "nvpmodel", "jetson_clocks"}
    assert "nvpmodel not installed" in r.missing["nvpmodel"]
    assert r.gpu_load_percent == pytest.approx(34.8)


@pytest.mark.parametrize("board", JETSONS)
def test_every_jetson_board_reports_the_headline_figures(board: str) -> None:
    r = JetsonSysfsCollector(board_root(board), ReplayRunner(board)).collect()
    assert r.available
    assert r.gpu_load_percent is not None
    assert r.temperatures_c
    assert r.power_total_mw
    assert r.power_total_mw > 0
    assert r.nvmap_used_bytes
    assert r.memory_available_bytes
    assert r.power_mode is not None


def test_buddyinfo_counts_top_order_blocks_across_zones() -> None:
    text = (
        "Node 0, zone      DMA      1      0      0      2\n"
        "Node 0, zone   Normal      5      3      1      4\n"
    )
    blocks = parse_buddyinfo(text, page_size=4096)
    assert blocks is not None
    assert (blocks.lfb_blocks, blocks.lfb_block_bytes) == (6, 4096 << 3)
    assert blocks.largest_free_block_bytes == 4096 << 3
    assert parse_buddyinfo("garbage\n", 4096) is None


def test_meminfo_scales_kilobytes_and_keeps_counts() -> None:
    values = parse_meminfo("MemTotal:  100 kB\nNvMapMemUsed:   7 kB\nHugePages_Total:   3\n")
    assert values == {"MemTotal": 102_400, "NvMapMemUsed": 7 * 1024, "HugePages_Total": 3}


@pytest.mark.parametrize(
    ("raw", "name"),
    [("GPU-therm", "gpu"), ("gpu-thermal", "gpu"), ("tj-thermal", "tj"), ("AO-therm", "ao")],
)
def test_thermal_names_are_spelled_one_way_across_jetpack_releases(raw: str, name: str) -> None:
    assert thermal_name(raw) == name
