"""The jtop collector against a stand-in ``jtop`` module shaped like jetson-stats 4.x.

jetson-stats needs its root service on a real Jetson, so the module is replaced with one that
keeps the library's conventions (properties as dicts in its units, ``JtopException`` from
``start`` when the service refuses, ``ok()`` false once the connection is gone).
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from agent.telemetry.collectors.jtop_collector import JTOP_SOCKET, JtopCollector


class JtopException(Exception):
    pass


class NVPModel:
    name = "MAXN_SUPER"
    id = 2


class FakeJtop:
    instances: list[FakeJtop] = []
    refuse: str | None = None

    def __init__(self, interval: float = 1.0) -> None:
        self.interval = interval
        self.started = False
        self.closed = False
        self.alive = True
        self.ok_calls: list[bool] = []
        FakeJtop.instances.append(self)

    def start(self) -> None:
        if FakeJtop.refuse:
            raise JtopException(FakeJtop.refuse)
        self.started = True

    def ok(self, spin: bool = False) -> bool:
        self.ok_calls.append(spin)
        return self.started and self.alive and not self.closed

    def close(self) -> None:
        self.closed = True

    gpu: Any = {
        "gpu": {"type": "integrated", "status": {"load": 57.3, "railgate": False}, "freq": {}}
    }
    temperature: Any = {
        "cpu": {"online": True, "temp": 51.2},
        "gpu": {"online": True, "temp": 49.9},
        "cv0": {"online": False, "temp": -256},
    }
    power: Any = {
        "rail": {
            "VDD_IN": {"online": True, "volt": 5064, "curr": 1500, "power": 7596, "avg": 7000},
            "VDD_SOC": {"online": True, "volt": 5064, "curr": 300, "power": 1519, "avg": 1500},
        },
        "tot": {"power": 7596, "avg": 7000, "name": "VDD_IN"},
    }
    memory: Any = {
        "RAM": {"tot": 7620184, "used": 3302100, "free": 2101456, "shared": 1325056, "lfb": 12}
    }
    nvpmodel: Any = NVPModel()
    jetson_clocks: Any = True


@pytest.fixture
def fake_jtop(monkeypatch: pytest.MonkeyPatch) -> type[FakeJtop]:
    module = types.ModuleType("jtop")
    module.jtop = FakeJtop  # type: ignore[attr-defined]
    module.JtopException = JtopException  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "jtop", module)
    FakeJtop.instances = []
    FakeJtop.refuse = None
    return FakeJtop


@pytest.fixture
def root_with_socket(tmp_path: Path) -> Path:
    socket = tmp_path / JTOP_SOCKET
    socket.parent.mkdir(parents=True)
    socket.touch()
    return tmp_path


def test_without_jetson_stats_the_reason_names_the_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "jtop", None)
    r = JtopCollector(tmp_path).collect()
    assert not r.available
    assert r.reason is not None
    assert "pip3 install -U jetson-stats" in r.reason


def test_without_the_service_socket_jtop_is_never_started(
    fake_jtop: type[FakeJtop], tmp_path: Path
) -> None:
    r = JtopCollector(tmp_path).collect()
    assert not r.available
    assert r.reason is not None
    assert "systemctl restart jtop.service" in r.reason
    assert fake_jtop.instances == []


def test_readings_in_the_collectors_units(
    fake_jtop: type[FakeJtop], root_with_socket: Path
) -> None:
    r = JtopCollector(root_with_socket).collect()
    assert r.available, r.reason
    assert r.gpu_load_percent == pytest.approx(57.3)
    assert r.temperatures_c == {"cpu": 51.2, "gpu": 49.9}
    assert [(rail.name, rail.power_mw) for rail in r.rails] == [("VDD_IN", 7596), ("VDD_SOC", 1519)]
    assert r.power_total_mw == 7596
    assert r.nvmap_used_bytes == 1325056 * 1024
    assert r.free_blocks is not None
    assert (r.free_blocks.lfb_blocks, r.free_blocks.lfb_block_bytes) == (12, 4 << 20)
    assert (r.power_mode, r.power_mode_id, r.jetson_clocks) == ("MAXN_SUPER", 2, True)


def test_one_connection_serves_many_samples_without_blocking_after_the_first(
    fake_jtop: type[FakeJtop], root_with_socket: Path
) -> None:
    collector = JtopCollector(root_with_socket)
    collector.collect()
    collector.collect()
    assert len(fake_jtop.instances) == 1
    assert fake_jtop.instances[0].ok_calls == [False, True]
    collector.close()
    assert fake_jtop.instances[0].closed


def test_a_lost_service_is_reported_and_reconnected_next_time(
    fake_jtop: type[FakeJtop], root_with_socket: Path
) -> None:
    collector = JtopCollector(root_with_socket)
    assert collector.collect().available
    fake_jtop.instances[0].alive = False
    lost = collector.collect()
    assert not lost.available
    assert fake_jtop.instances[0].closed
    assert collector.collect().available
    assert len(fake_jtop.instances) == 2


def test_a_refusing_service_gives_its_message(
    fake_jtop: type[FakeJtop], root_with_socket: Path
) -> None:
    fake_jtop.refuse = "Mismatch version jtop service: [4.2.0] and client: [4.3.1]"
    r = JtopCollector(root_with_socket).collect()
    assert not r.available
    assert r.reason is not None
    assert "Mismatch version" in r.reason
