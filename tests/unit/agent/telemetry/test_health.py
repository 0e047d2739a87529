"""The sampler: the collectors that fit the machine, one dict-able sample, headline figures."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

from agent.telemetry.collectors.health import HealthSampler, default_sampler
from agent.telemetry.collectors.host import HostCollector
from agent.telemetry.collectors.inference import HistogramMetrics, InferenceCollector
from agent.telemetry.collectors.jetson_sysfs import JetsonSysfsCollector
from tests.unit.agent.telemetry.boards import ReplayRunner, board_root


def test_a_jetson_gets_jetson_collectors_and_no_nvml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "jtop", None)
    metrics = HistogramMetrics()
    sampler = default_sampler(
        tmp_path,
        InferenceCollector(metrics, active=lambda: {"detector": "1"}),
        root=board_root("orin-nano-8gb"),
        run=ReplayRunner("orin-nano-8gb"),
    )
    metrics.record("detector", "1", 0.012, ok=True)
    readings = sampler.collect()
    sampler.close()
    assert readings.nvml is None
    assert readings.jtop is not None
    assert not readings.jtop.available
    fields = readings.telemetry_fields()
    assert fields["gpu_load_percent"] == pytest.approx(34.8)
    assert fields["power_mode"] == "15W"
    assert fields["jetson_clocks"] is False
    assert fields["lfb_blocks"] == 3
    assert fields["temperature_max_c"] == pytest.approx(48.531)
    assert fields["power_rails_mw"]["VDD_IN"] == pytest.approx(5064 * 1208 / 1000)
    assert fields["memory_available_bytes"] == 4_712_320 * 1024, "MemAvailable of the board"
    assert set(fields["sources_absent"]) == {"jtop"}
    assert "jetson-stats" in fields["sources_absent"]["jtop"]
    assert readings.inference is not None
    assert readings.inference.models[0].requests == 1
    json.dumps(readings.as_dict())


def test_a_host_without_a_jetson_asks_nvml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    sampler = default_sampler(tmp_path, root=board_root("plain-x86"))
    readings = sampler.collect()
    assert readings.jetson is None
    assert readings.jtop is None
    assert readings.nvml is not None
    assert not readings.nvml.available
    fields = readings.telemetry_fields()
    assert fields["gpu_load_percent"] is None
    assert fields["memory_available_bytes"] == readings.host.memory_available_bytes  # type: ignore[union-attr]
    assert fields["disk_free_bytes"] is not None
    assert "nvidia-ml-py" in fields["sources_absent"]["nvml"]


class BrokenCollector(JetsonSysfsCollector):
    def collect(self):  # type: ignore[no-untyped-def]
        raise RuntimeError("parser bug")


def test_a_broken_collector_costs_only_its_own_part(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sampler = HealthSampler(host=HostCollector(tmp_path), jetson=BrokenCollector())
    with caplog.at_level(logging.ERROR):
        readings = sampler.collect()
    assert readings.host is not None
    assert readings.host.available
    assert readings.jetson is not None
    assert not readings.jetson.available
    assert "parser bug" in (readings.jetson.reason or "")
    assert "collector BrokenCollector failed" in caplog.text
