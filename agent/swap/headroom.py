"""Measures memory headroom for :mod:`agent.swap.admission`, per kind of device (the adapter side).

* ``jetson``: ``/proc/meminfo`` MemAvailable (CPU and GPU share one DRAM pool), ``NvMapMemUsed``
  for the record, and ``lfb`` from ``/proc/buddyinfo`` (largest physically contiguous free block),
  parsed by :mod:`agent.telemetry.collectors.jetson_sysfs`.
* ``dgpu``: NVML's free memory of GPU 0 (the agent calls no CUDA: a CUDA context would cost it
  hundreds of MiB, and TensorRT's hosts hold their own). Host RAM is not the
  constraint there.
* ``cpu``: MemAvailable (ONNX Runtime on the CPU).

The budget (admission's *accounted* check) is ``budget_fraction`` of the total memory.
Everything read goes through ``root`` so tests point it at fixture trees.
"""

from __future__ import annotations

import contextlib
import mmap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agent.swap.admission import Headroom
from agent.telemetry.collectors.jetson_sysfs import (
    BUDDYINFO,
    MEMINFO,
    parse_buddyinfo,
    parse_meminfo,
)

Kind = Literal["jetson", "dgpu", "cpu"]


@dataclass(frozen=True)
class MemorySnapshot:
    """What telemetry and swap events report before and after a swap (bytes; None if unknown)."""

    available_bytes: int | None
    nvmap_used_bytes: int | None = None
    lfb_bytes: int | None = None
    device_free_bytes: int | None = None
    rss_bytes: int | None = None

    def as_dict(self) -> dict[str, int | None]:
        return {
            "available_bytes": self.available_bytes,
            "nvmap_used_bytes": self.nvmap_used_bytes,
            "lfb_bytes": self.lfb_bytes,
            "device_free_bytes": self.device_free_bytes,
            "rss_bytes": self.rss_bytes,
        }


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _rss() -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return None


def _device_memory() -> tuple[int, int] | None:
    """(free, total) of GPU 0 through NVML, or None without NVML or a device."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        try:
            info: Any = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0))
            return int(info.free), int(info.total)
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        return None


class HeadroomProbe:
    """Reads headroom and memory snapshots for one kind of device."""

    def __init__(
        self,
        kind: Kind,
        root: Path = Path("/"),
        budget_fraction: float = 0.85,
        page_size: int = mmap.PAGESIZE,
    ) -> None:
        self.kind = kind
        self._root = root
        self._budget_fraction = budget_fraction
        self._page_size = page_size

    def _meminfo(self) -> dict[str, int]:
        return parse_meminfo(_read(self._root / MEMINFO))

    def snapshot(self) -> MemorySnapshot:
        """Memory now, for the before/after record of a swap."""
        info = self._meminfo()
        lfb = None
        if self.kind == "jetson":
            blocks = parse_buddyinfo(_read(self._root / BUDDYINFO), self._page_size)
            lfb = blocks.lfb_blocks * blocks.lfb_block_bytes if blocks else None
        device = _device_memory() if self.kind == "dgpu" else None
        return MemorySnapshot(
            available_bytes=info.get("MemAvailable"),
            nvmap_used_bytes=info.get("NvMapMemUsed"),
            lfb_bytes=lfb,
            device_free_bytes=device[0] if device else None,
            rss_bytes=_rss(),
        )

    def headroom(self) -> Headroom:
        """Headroom for admission; a source that cannot be read counts as ample (and says so)."""
        info = self._meminfo()
        available = info.get("MemAvailable")
        total = info.get("MemTotal")
        if self.kind == "dgpu":
            device = _device_memory()
            if device is not None:
                free, dev_total = device
                return Headroom(free, int(dev_total * self._budget_fraction), "NVML free")
        if available is None or total is None:
            unknown = 1 << 62
            return Headroom(unknown, unknown, f"unknown: {self._root / MEMINFO} unreadable")
        lfb = None
        source = "MemAvailable"
        if self.kind == "jetson":
            blocks = parse_buddyinfo(_read(self._root / BUDDYINFO), self._page_size)
            if blocks is not None:
                # Contiguous room: every free top-order block could merge into one NvMap region;
                # the largest free block alone is a lower bound.
                lfb = max(
                    blocks.lfb_blocks * blocks.lfb_block_bytes, blocks.largest_free_block_bytes
                )
                source = "MemAvailable, lfb"
        return Headroom(available, int(total * self._budget_fraction), source, lfb)
