"""The jtop collector fed with jetson-stats' answers on a board (``tests/fixtures/telemetry/
orin-nano-8gb/jtop.json``: its header says where each value and shape comes from).

jetson-stats needs its root service on a real Jetson, so the jtop client is replayed: a
``jtop.jtop`` whose properties answer the recorded sample the way the library's do (``gpu`` and
``memory`` through its read-only ``GenericInterface`` view, ``power`` and ``temperature`` as the
service's dicts, ``nvpmodel`` with ``id``/``name``, ``jetson_clocks`` truthy when enabled), and
whose ``start``/``ok``/``close`` follow the library's connection rules (``JtopException`` from
``start`` when the service refuses, ``ok()`` false once the connection is gone).
"""

from __future__ import annotations

import json
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.telemetry.collectors.jtop_collector import JTOP_SOCKET, JtopCollector, readings_from_jtop
from tests.unit.agent.telemetry.boards import BOARDS

SAMPLE: dict[str, Any] = json.loads((BOARDS / "orin-nano-8gb" / "jtop.json").read_text())


class GenericInterface:
    """jetson-stats' view of ``gpu`` and ``memory`` (jtop/core/common.py): read like a dict
    (items, keys, values, get, [], in, len, iter) but not a ``dict``."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def items(self) -> Any:
        return self._data.items()

    def keys(self) -> Any:
        return self._data.keys()

    def values(self) -> Any:
        return self._data.values()

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)


class NVPModel:
    """``jetson.nvpmodel``: the model in use (jtop/core/nvpmodel.py ``id``, ``name``)."""

    def __init__(self, model: dict[str, Any]) -> None:
        self._model = model

    @property
    def id(self) -> int:
        return int(self._model["id"])

    @property
    def name(self) -> str:
        return str(self._model["name"])


class JetsonClocks:
    """``jetson.jetson_clocks``: truthy when enabled (jtop/core/jetson_clocks.py __bool__)."""

    def __init__(self, enable: bool) -> None:
        self._enable = enable

    def __bool__(self) -> bool:
        return self._enable


class RecordedJtop:
    """A started jtop client answering the recorded sample."""

    def __init__(self, sample: dict[str, Any]) -> None:
        self.gpu = GenericInterface(sample["gpu"])
        self.memory = GenericInterface(sample["memory"])
        self.power = sample["power"]
        self.temperature = sample["temperature"]
        self.nvpmodel = NVPModel(sample["nvpmodel"])
        self.jetson_clocks = JetsonClocks(sample["jetson_clocks"])


class JtopException(Exception):
    pass


class ReplayedClient(RecordedJtop):
    """``jtop.jtop``: connects on ``start``, then answers the recording until it is closed."""

    instances: list[ReplayedClient] = []
    refuse: str | None = None

    def __init__(self, interval: float = 1.0) -> None:
        super().__init__(SAMPLE)
        self.interval = interval
        self.started = False
        self.closed = False
        self.alive = True
        self.ok_calls: list[bool] = []
        ReplayedClient.instances.append(self)

    def start(self) -> None:
        if ReplayedClient.refuse:
            raise JtopException(ReplayedClient.refuse)
        self.started = True

    def ok(self, spin: bool = False) -> bool:
        self.ok_calls.append(spin)
        return self.started and self.alive and not self.closed

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def replayed_jtop(monkeypatch: pytest.MonkeyPatch) -> type[ReplayedClient]:
    module = types.ModuleType("jtop")
    module.jtop = ReplayedClient  # type: ignore[attr-defined]
    module.JtopException = JtopException  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "jtop", module)
    ReplayedClient.instances = []
    ReplayedClient.refuse = None
    return ReplayedClient


@pytest.fixture
def root_with_socket(tmp_path: Path) -> Path:
    socket = tmp_path / JTOP_SOCKET
    socket.parent.mkdir(parents=True)
    socket.touch()
    return tmp_path


def test_the_boards_sample_in_the_collectors_units() -> None:
    """Expected values read off the board's recorded tree (tests/fixtures/telemetry/
    orin-nano-8gb/root): devfreq load 348 (per mille), thermal zones in m°C (cv* offline at
    -256000), INA3221 5064 mV at 1208/392/296 mA, /proc/meminfo and /proc/buddyinfo in KiB."""
    r = readings_from_jtop(RecordedJtop(SAMPLE))
    assert r.available
    assert r.gpu_load_percent == pytest.approx(34.8)
    assert r.temperatures_c == {
        "cpu": 48.531,
        "gpu": 47.093,
        "soc0": 46.25,
        "soc1": 46.968,
        "soc2": 45.812,
        "tj": 48.531,
    }
    # jtop reports VDD_IN as the total, not as a rail (jtop/core/power.py total_power)
    assert [(rail.name, rail.voltage_mv, rail.current_ma, rail.power_mw) for rail in r.rails] == [
        ("VDD_CPU_GPU_CV", 5064, 392, 5064 * 392 // 1000),
        ("VDD_SOC", 5064, 296, 5064 * 296 // 1000),
    ]
    assert r.power_total_mw == 5064 * 1208 // 1000
    assert r.memory_total_bytes == 7_620_184 * 1024
    assert r.memory_used_bytes == (7_620_184 - 2_101_456 - 52_300 - 2_201_388) * 1024
    assert r.nvmap_used_bytes == 1_325_056 * 1024, "NvMapMemUsed"
    assert r.free_blocks is not None
    assert (r.free_blocks.lfb_blocks, r.free_blocks.lfb_block_bytes) == (3, 4 << 20)
    assert r.free_blocks.largest_free_block_bytes == 4 << 20
    assert (r.power_mode, r.power_mode_id, r.jetson_clocks) == ("15W", 0, False)


def test_the_readings_agree_with_jtops_own_summary() -> None:
    """jtop's ``stats`` (its tegrastats-like summary, recorded beside the properties) says
    the same as the collector's readings."""
    r = readings_from_jtop(RecordedJtop(SAMPLE))
    stats = SAMPLE["stats"]
    assert r.gpu_load_percent == stats["GPU"]
    online = {
        key.removeprefix("Temp "): value
        for key, value in stats.items()
        if key.startswith("Temp ") and value > -256
    }
    assert r.temperatures_c == online
    assert {rail.name: rail.power_mw for rail in r.rails} == {
        key.removeprefix("Power "): value
        for key, value in stats.items()
        if key.startswith("Power ") and key != "Power TOT"
    }
    assert r.power_total_mw == stats["Power TOT"]
    assert r.memory_used_bytes is not None
    assert r.memory_total_bytes is not None
    assert r.memory_used_bytes / r.memory_total_bytes == pytest.approx(stats["RAM"])
    assert r.power_mode == stats["nvp model"]
    assert ("ON" if r.jetson_clocks else "OFF") == stats["jetson_clocks"]


def test_without_jetson_stats_the_reason_names_the_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "jtop", None)
    r = JtopCollector(tmp_path).collect()
    assert not r.available
    assert r.reason is not None
    assert "pip3 install -U jetson-stats" in r.reason


def test_without_the_service_socket_jtop_is_never_started(
    replayed_jtop: type[ReplayedClient], tmp_path: Path
) -> None:
    r = JtopCollector(tmp_path).collect()
    assert not r.available
    assert r.reason is not None
    assert "systemctl restart jtop.service" in r.reason
    assert replayed_jtop.instances == []


def test_a_started_service_gives_the_boards_sample(
    replayed_jtop: type[ReplayedClient], root_with_socket: Path
) -> None:
    r = JtopCollector(root_with_socket).collect()
    assert r.available, r.reason
    assert r == readings_from_jtop(RecordedJtop(SAMPLE))


def test_one_connection_serves_many_samples_without_blocking_after_the_first(
    replayed_jtop: type[ReplayedClient], root_with_socket: Path
) -> None:
    collector = JtopCollector(root_with_socket)
    collector.collect()
    collector.collect()
    assert len(replayed_jtop.instances) == 1
    assert replayed_jtop.instances[0].ok_calls == [False, True]
    collector.close()
    assert replayed_jtop.instances[0].closed


def test_a_lost_service_is_reported_and_reconnected_next_time(
    replayed_jtop: type[ReplayedClient], root_with_socket: Path
) -> None:
    collector = JtopCollector(root_with_socket)
    assert collector.collect().available
    replayed_jtop.instances[0].alive = False
    lost = collector.collect()
    assert not lost.available
    assert replayed_jtop.instances[0].closed
    assert collector.collect().available
    assert len(replayed_jtop.instances) == 2


def test_a_refusing_service_gives_its_message(
    replayed_jtop: type[ReplayedClient], root_with_socket: Path
) -> None:
    replayed_jtop.refuse = "Mismatch version jtop service: [4.2.0] and client: [4.3.1]"
    r = JtopCollector(root_with_socket).collect()
    assert not r.available
    assert r.reason is not None
    assert "Mismatch version" in r.reason
