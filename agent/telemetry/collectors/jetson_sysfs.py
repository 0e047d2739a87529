"""Jetson health from sysfs and procfs, read through a configurable root (``/`` on a device).

Sources, as jetson-stats reads them (docs/tensorrt.md#memory-on-a-jetson, #jtop-jetson-stats): GPU
load and frequency from the GPU's devfreq node, temperatures from thermal zones, power rails from
the INA3221 monitors, ``MemAvailable`` and ``NvMapMemUsed`` from ``/proc/meminfo``, fragmentation
from ``/proc/buddyinfo``, and the power mode and clock lock from ``nvpmodel -q`` and
``jetson_clocks --show`` (slow tools, so they are re-run at most every ``tools_every_s``).

Why ``lfb`` (largest free block) matters on a Jetson: CPU, GPU, DLA and codecs share one DRAM
pool, and CUDA / TensorRT allocations go through NvMap, which wants large physically contiguous
blocks. After many engine loads and swaps the free memory splinters into small pages:
``MemAvailable`` still looks generous, yet a new engine fails to load (NvMap ``error 12``)
because no large block is left. ``lfb`` — the free blocks of the highest buddy order
(4 MiB with 4 KiB pages; tegrastats prints ``lfb 512x4MB``) — falls long before that happens,
so a shrinking ``lfb`` across swaps is the early warning to stop swapping or restart the worker.
"""

from __future__ import annotations

import mmap
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent.hardware import jetson_text
from agent.hardware.commands import Runner, default_runner, failure_reason

DEVFREQ = Path("sys/class/devfreq")
THERMAL = Path("sys/class/thermal")
INA3221 = Path("sys/bus/i2c/drivers/ina3221")
MEMINFO = Path("proc/meminfo")
BUDDYINFO = Path("proc/buddyinfo")
RELEASE_FILE = Path("etc/nv_tegra_release")
NVPMODEL_QUERY = ("nvpmodel", "-q")
JETSON_CLOCKS_SHOW = ("jetson_clocks", "--show")

GPU_NODE_NAMES = frozenset({"gpu", "ga10b", "gv11b", "gp10b", "gb10b", "gk20a", "gm20b"})
"""``of_node/name`` values of integrated GPUs in devfreq (jetson-stats ``find_igpu``)."""

THERMAL_OFFLINE_MILLI_C = -256000
_LABEL_FILE = re.compile(r"^in(?P<n>\d+)_label$")
_THERMAL_SUFFIX = re.compile(r"[-_](thermal|therm)$", re.IGNORECASE)
_MEMINFO_LINE = re.compile(r"^(?P<key>\w+):\s+(?P<value>\d+)(?:\s+kB)?$")


@dataclass(frozen=True)
class RailReading:
    """One INA3221 channel: bus voltage, current and their product."""

    name: str
    voltage_mv: int
    current_ma: int
    power_mw: float


@dataclass(frozen=True)
class FreeBlocks:
    """Fragmentation from ``/proc/buddyinfo``.

    ``lfb_blocks`` counts free blocks of the highest buddy order (tegrastats' ``lfb NxSIZE``),
    each ``lfb_block_bytes`` long; ``largest_free_block_bytes`` is the biggest block free at all.
    """

    lfb_blocks: int
    lfb_block_bytes: int
    largest_free_block_bytes: int


@dataclass(frozen=True)
class JetsonReadings:
    """One Jetson sample; ``missing`` maps each source that did not answer to why."""

    available: bool
    reason: str | None = None
    gpu_load_percent: float | None = None
    gpu_freq_hz: int | None = None
    temperatures_c: dict[str, float] = field(default_factory=dict)
    rails: tuple[RailReading, ...] = ()
    power_total_mw: float | None = None
    memory_total_bytes: int | None = None
    memory_available_bytes: int | None = None
    nvmap_used_bytes: int | None = None
    free_blocks: FreeBlocks | None = None
    power_mode: str | None = None
    power_mode_id: int | None = None
    jetson_clocks: bool | None = None
    missing: dict[str, str] = field(default_factory=dict)


# --- pure parsers ------------------------------------------------------------------------------


def parse_meminfo(text: str) -> dict[str, int]:
    """``/proc/meminfo`` → bytes per key (kB values times 1024; unitless counts as they are)."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        match = _MEMINFO_LINE.match(line.strip())
        if match:
            scale = 1024 if line.rstrip().endswith("kB") else 1
            values[match["key"]] = int(match["value"]) * scale
    return values


def parse_buddyinfo(text: str, page_size: int) -> FreeBlocks | None:
    """``/proc/buddyinfo`` (``Node 0, zone Normal  c0 c1 … cN``) → free blocks; None if empty."""
    zones: list[list[int]] = []
    for line in text.splitlines():
        head, sep, counts = line.partition("zone")
        if not sep or not head.startswith("Node"):
            continue
        fields = counts.split()
        if len(fields) < 2:
            continue
        try:
            zones.append([int(value) for value in fields[1:]])
        except ValueError:
            continue
    if not zones:
        return None
    top = max(len(zone) for zone in zones) - 1
    lfb_blocks = sum(zone[top] for zone in zones if len(zone) == top + 1)
    orders = [order for zone in zones for order, count in enumerate(zone) if count > 0]
    largest = page_size << max(orders) if orders else 0
    return FreeBlocks(
        lfb_blocks=lfb_blocks, lfb_block_bytes=page_size << top, largest_free_block_bytes=largest
    )


def thermal_name(zone_type: str) -> str:
    """``GPU-therm`` / ``gpu-thermal`` → ``gpu``: one spelling across JetPack releases."""
    return _THERMAL_SUFFIX.sub("", zone_type.strip()).lower()


def total_power_mw(rails: Sequence[RailReading]) -> float | None:
    """The module's input power: the ``VDD_IN`` rail where one exists, else the rails' sum."""
    for rail in rails:
        if rail.name == "VDD_IN":
            return rail.power_mw
    return sum(rail.power_mw for rail in rails) if rails else None


# --- file readers ------------------------------------------------------------------------------


def _text(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


def _int(path: Path) -> int | None:
    text = _text(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _children(path: Path) -> list[Path]:
    try:
        return sorted(path.iterdir())
    except OSError:
        return []


def read_gpu(root: Path) -> tuple[float | None, int | None]:
    """GPU load (percent; devfreq ``load`` is per mille) and current frequency (Hz)."""
    for node in _children(root / DEVFREQ):
        of_name = _text(node / "device" / "of_node" / "name")
        suffix = node.name.rpartition(".")[2]
        if of_name not in GPU_NODE_NAMES and suffix not in GPU_NODE_NAMES:
            continue
        load = _int(node / "device" / "load")
        return (load / 10.0 if load is not None else None), _int(node / "cur_freq")
    return None, None


def read_temperatures(root: Path) -> dict[str, float]:
    """Online thermal zones in °C; the PMIC zone is skipped, it reports a fixed placeholder."""
    temperatures: dict[str, float] = {}
    for zone in _children(root / THERMAL):
        if not zone.name.startswith("thermal_zone"):
            continue
        zone_type = _text(zone / "type")
        milli_c = _int(zone / "temp")
        if zone_type is None or milli_c is None or milli_c <= THERMAL_OFFLINE_MILLI_C:
            continue
        if "pmic" in zone_type.lower():
            continue
        temperatures[thermal_name(zone_type)] = milli_c / 1000.0
    return temperatures


def _hwmon_dirs(root: Path) -> Iterable[Path]:
    for chip in _children(root / INA3221):
        yield from (h for h in _children(chip / "hwmon") if h.name.startswith("hwmon"))


def read_rails(root: Path) -> tuple[RailReading, ...]:
    """Every labelled INA3221 channel (``NC`` = not connected is skipped)."""
    rails: list[RailReading] = []
    for hwmon in _hwmon_dirs(root):
        for label_file in _children(hwmon):
            match = _LABEL_FILE.match(label_file.name)
            if not match:
                continue
            name = _text(label_file)
            volt = _int(hwmon / f"in{match['n']}_input")
            curr = _int(hwmon / f"curr{match['n']}_input")
            if not name or name == "NC" or volt is None or curr is None:
                continue
            rails.append(RailReading(name, volt, curr, volt * curr / 1000.0))
    return tuple(rails)


# --- the collector -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Tools:
    power_mode: jetson_text.PowerMode | None
    jetson_clocks: bool | None
    missing: dict[str, str]


class JetsonSysfsCollector:
    """Reads a Jetson's health files under ``root`` and, now and then, its power tools."""

    def __init__(
        self,
        root: Path = Path("/"),
        run: Runner = default_runner,
        page_size: int = mmap.PAGESIZE,
        tools_every_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._root = root
        self._run = run
        self._page_size = page_size
        self._tools_every_s = tools_every_s
        self._clock = clock
        self._tools: _Tools | None = None
        self._tools_at: float | None = None

    def collect(self) -> JetsonReadings:
        """A sample; absent with the reason when nothing under ``root`` looks like a Jetson."""
        root = self._root
        missing: dict[str, str] = {}
        load, freq = read_gpu(root)
        if load is None:
            missing["gpu"] = f"no GPU devfreq node with a load file under {root / DEVFREQ}"
        temperatures = read_temperatures(root)
        if not temperatures:
            missing["thermal"] = f"no readable thermal zone under {root / THERMAL}"
        rails = read_rails(root)
        if not rails:
            missing["power"] = f"no INA3221 rails under {root / INA3221}"
        meminfo = parse_meminfo(_text(root / MEMINFO) or "")
        if "NvMapMemUsed" not in meminfo:
            missing["nvmap"] = f"no NvMapMemUsed in {root / MEMINFO}"
        blocks = parse_buddyinfo(_text(root / BUDDYINFO) or "", self._page_size)
        if blocks is None:
            missing["lfb"] = f"{root / BUDDYINFO} missing or unreadable"
        is_jetson = (
            load is not None
            or bool(rails)
            or "NvMapMemUsed" in meminfo
            or (root / RELEASE_FILE).exists()
        )
        if not is_jetson:
            return JetsonReadings(
                available=False,
                reason=f"not a Jetson: no GPU devfreq node, INA3221 rails, NvMapMemUsed or "
                f"nv_tegra_release under {root}",
            )
        tools = self._refresh_tools()
        missing.update(tools.missing)
        return JetsonReadings(
            available=True,
            gpu_load_percent=load,
            gpu_freq_hz=freq,
            temperatures_c=temperatures,
            rails=rails,
            power_total_mw=total_power_mw(rails),
            memory_total_bytes=meminfo.get("MemTotal"),
            memory_available_bytes=meminfo.get("MemAvailable"),
            nvmap_used_bytes=meminfo.get("NvMapMemUsed"),
            free_blocks=blocks,
            power_mode=tools.power_mode.name if tools.power_mode else None,
            power_mode_id=tools.power_mode.id if tools.power_mode else None,
            jetson_clocks=tools.jetson_clocks,
            missing=missing,
        )

    def _refresh_tools(self) -> _Tools:
        now = self._clock()
        if (
            self._tools is not None
            and self._tools_at is not None
            and now - self._tools_at < self._tools_every_s
        ):
            return self._tools
        missing: dict[str, str] = {}
        mode: jetson_text.PowerMode | None = None
        rc, out = self._run(NVPMODEL_QUERY)
        if rc == 0:
            mode = jetson_text.power_mode_from_query(out)
        if mode is None:
            missing["nvpmodel"] = failure_reason(NVPMODEL_QUERY, rc, out)
        clocks: bool | None = None
        rc, out = self._run(JETSON_CLOCKS_SHOW)
        if rc == 0:
            clocks = jetson_text.jetson_clocks_from_show(out)
        if clocks is None:
            missing["jetson_clocks"] = failure_reason(JETSON_CLOCKS_SHOW, rc, out)
        self._tools, self._tools_at = _Tools(mode, clocks, missing), now
        return self._tools

    def close(self) -> None:
        """Nothing to release; here so every collector closes the same way."""
