"""Jetson health from jetson-stats' root service (``jtop``), when it runs.

Used only when ``jtop`` imports AND its service socket exists, because ``jtop()`` waits on a missing
service before it raises (docs/tensorrt.md#jtop-jetson-stats). One connection is kept open between
samples; it is dropped on the first error and opened again on the next ``collect``. jtop's units are
converted to the sysfs collector's: ``memory['RAM']`` is in KiB, ``lfb`` counts 4 MiB blocks, power
is in mW and temperatures in °C (-256 when offline). Only the first ``collect`` waits for a sample
(``ok()``); later ones read the latest without blocking (``ok(spin=True)``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.telemetry.collectors.jetson_sysfs import FreeBlocks, RailReading

JTOP_SOCKET = Path("run/jtop.sock")
JTOP_INTERVAL_S = 1.0
LFB_BLOCK_BYTES = 4 << 20
OFFLINE_TEMP_C = -256.0


@dataclass(frozen=True)
class JtopReadings:
    """One sample from jtop's service."""

    available: bool
    reason: str | None = None
    gpu_load_percent: float | None = None
    temperatures_c: dict[str, float] = field(default_factory=dict)
    rails: tuple[RailReading, ...] = ()
    power_total_mw: float | None = None
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    nvmap_used_bytes: int | None = None
    free_blocks: FreeBlocks | None = None
    power_mode: str | None = None
    power_mode_id: int | None = None
    jetson_clocks: bool | None = None


def _float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _kib(value: Any) -> int | None:
    number = _float(value)
    return int(number * 1024) if number is not None else None


def _mapping(value: Any) -> dict[Any, Any]:
    """A jtop property as a dict. ``power`` and ``temperature`` are dicts, but ``gpu`` and
    ``memory`` are jetson-stats' ``GenericInterface`` objects: read like a dict (``items``,
    ``get``), not ``dict`` instances."""
    if isinstance(value, dict):
        return value
    items = getattr(value, "items", None)
    if not callable(items):
        return {}
    try:
        return dict(items())
    except (TypeError, ValueError):
        return {}


def readings_from_jtop(jetson: Any) -> JtopReadings:
    """Map a started ``jtop``'s properties (docs/tensorrt.md#jtop-jetson-stats) onto readings."""
    gpus = _mapping(jetson.gpu)
    load = next(
        (
            _float(gpu.get("status", {}).get("load"))
            for gpu in gpus.values()
            if isinstance(gpu, dict) and gpu.get("type") == "integrated"
        ),
        None,
    )
    temperatures = {
        str(name).lower(): float(reading["temp"])
        for name, reading in _mapping(jetson.temperature).items()
        if isinstance(reading, dict)
        and reading.get("online", True)
        and _float(reading.get("temp")) is not None
        and float(reading["temp"]) > OFFLINE_TEMP_C
    }
    power = _mapping(jetson.power)
    rails = tuple(
        RailReading(
            name=str(name),
            voltage_mv=int(_float(rail.get("volt")) or 0),
            current_ma=int(_float(rail.get("curr")) or 0),
            power_mw=_float(rail.get("power")) or 0.0,
        )
        for name, rail in (power.get("rail") or {}).items()
        if isinstance(rail, dict) and rail.get("online", True)
    )
    total = power.get("tot")
    ram = _mapping(_mapping(jetson.memory).get("RAM"))
    lfb = _float(ram.get("lfb"))
    nvp = jetson.nvpmodel
    clocks = jetson.jetson_clocks
    return JtopReadings(
        available=True,
        gpu_load_percent=load,
        temperatures_c=temperatures,
        rails=rails,
        power_total_mw=_float(total.get("power")) if isinstance(total, dict) else None,
        memory_total_bytes=_kib(ram.get("tot")),
        memory_used_bytes=_kib(ram.get("used")),
        nvmap_used_bytes=_kib(ram.get("shared")),
        free_blocks=FreeBlocks(
            lfb_blocks=int(lfb),
            lfb_block_bytes=LFB_BLOCK_BYTES,
            largest_free_block_bytes=LFB_BLOCK_BYTES if lfb > 0 else 0,
        )
        if lfb is not None
        else None,
        power_mode=str(nvp.name) if nvp is not None else None,
        power_mode_id=int(nvp.id) if nvp is not None else None,
        jetson_clocks=bool(clocks) if clocks is not None else None,
    )


class JtopCollector:
    """Samples jtop's service; absent with the reason when the package or service is missing."""

    def __init__(self, root: Path = Path("/"), interval_s: float = JTOP_INTERVAL_S) -> None:
        self._socket = root / JTOP_SOCKET
        self._interval_s = interval_s
        self._jetson: Any = None

    def collect(self) -> JtopReadings:
        """The latest sample of the service."""
        try:
            import jtop
        except ImportError as exc:
            return JtopReadings(
                available=False,
                reason=f"jetson-stats not installed ({exc}): sudo pip3 install -U jetson-stats",
            )
        if not self._socket.exists():
            self.close()
            return JtopReadings(
                available=False,
                reason=f"jtop service not running ({self._socket} missing): "
                "sudo systemctl restart jtop.service",
            )
        try:
            first = self._jetson is None
            if first:
                jetson = jtop.jtop(interval=self._interval_s)
                jetson.start()
                self._jetson = jetson
            if not self._jetson.ok(spin=not first):
                self.close()
                return JtopReadings(available=False, reason="jtop service sent no sample")
            return readings_from_jtop(self._jetson)
        except (jtop.JtopException, OSError) as exc:
            self.close()
            return JtopReadings(available=False, reason=f"jtop service refused: {exc}")

    def close(self) -> None:
        """Close the connection to the service, if one is open."""
        jetson, self._jetson = self._jetson, None
        if jetson is not None:
            with contextlib.suppress(Exception):
                jetson.close()
