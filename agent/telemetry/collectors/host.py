"""Host load through psutil: CPU, RAM, the state directory's disk and network traffic.

Network counters are totals since boot; telemetry wants what moved during the interval, so the
collector keeps the previous totals and reports deltas (``None`` on the first sample, and after a
counter went backwards because an interface was reset).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil


@dataclass(frozen=True)
class HostReadings:
    """One psutil sample; byte counts are bytes, network figures cover ``interval_s``."""

    available: bool
    reason: str | None = None
    cpu_percent: float | None = None
    per_core_percent: tuple[float, ...] | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    memory_available_bytes: int | None = None
    disk_path: str | None = None
    disk_used_bytes: int | None = None
    disk_free_bytes: int | None = None
    disk_total_bytes: int | None = None
    net_sent_bytes: int | None = None
    net_recv_bytes: int | None = None
    interval_s: float | None = None


def counter_delta(previous: int | None, current: int) -> int | None:
    """Growth of a monotonic counter; ``None`` without a baseline or when it was reset."""
    if previous is None or current < previous:
        return None
    return current - previous


def busy_percent(before: Any, after: Any) -> float:
    """CPU busy share between two ``psutil.cpu_times()`` snapshots, as psutil computes it.

    Idle and iowait count as idle. Keeping the snapshots here (rather than calling
    ``psutil.cpu_percent``, whose baseline is one per process) lets this collector and any other
    caller measure their own intervals without resetting each other.
    """
    total = sum(after) - sum(before)
    idle = (after.idle - before.idle) + (
        getattr(after, "iowait", 0.0) - getattr(before, "iowait", 0.0)
    )
    if total <= 0:
        return 0.0
    return float(max(0.0, min(100.0, 100.0 * (total - idle) / total)))


def existing_ancestor(path: Path) -> Path:
    """``path`` or its nearest existing parent: the disk it will live on before it is created."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(path.anchor or "/")


class HostCollector:
    """Samples CPU, memory, disk and network; CPU percentages cover the time since the last call.

    The first CPU figure covers the time since construction, which takes the first baseline.
    ``per_core_percent`` is ``None`` for a sample during which cores went on- or offline (Jetson
    power modes switch cores off), since the cores can no longer be paired with the baseline.
    """

    def __init__(
        self,
        state_dir: Path,
        per_core: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._state_dir = state_dir
        self._per_core = per_core
        self._clock = clock
        self._last_net: tuple[int, int] | None = None
        self._last_t: float | None = None
        self._last_cpu = psutil.cpu_times()
        self._last_cores: list[Any] = psutil.cpu_times(percpu=True) if per_core else []
        self._prime_network()

    def _prime_network(self) -> None:
        net = psutil.net_io_counters()
        if net is not None:
            self._last_net = (int(net.bytes_sent), int(net.bytes_recv))
            self._last_t = self._clock()

    def collect(self) -> HostReadings:
        """A sample of the host now; fields psutil cannot read here stay ``None``."""
        cpu_now = psutil.cpu_times()
        cpu = busy_percent(self._last_cpu, cpu_now)
        self._last_cpu = cpu_now
        per_core: tuple[float, ...] | None = None
        if self._per_core:
            cores_now = psutil.cpu_times(percpu=True)
            if len(cores_now) == len(self._last_cores):
                pairs = zip(self._last_cores, cores_now, strict=True)
                per_core = tuple(busy_percent(b, a) for b, a in pairs)
            self._last_cores = cores_now
        memory = psutil.virtual_memory()
        disk_path = existing_ancestor(self._state_dir)
        disk_used: int | None = None
        disk_free: int | None = None
        disk_total: int | None = None
        try:
            disk = psutil.disk_usage(str(disk_path))
            disk_used, disk_free, disk_total = int(disk.used), int(disk.free), int(disk.total)
        except OSError:
            pass
        now = self._clock()
        sent = recv = None
        interval = None
        net = psutil.net_io_counters()
        if net is not None:
            current = (int(net.bytes_sent), int(net.bytes_recv))
            if self._last_net is not None and self._last_t is not None:
                sent = counter_delta(self._last_net[0], current[0])
                recv = counter_delta(self._last_net[1], current[1])
                interval = max(now - self._last_t, 0.0)
            self._last_net, self._last_t = current, now
        return HostReadings(
            available=True,
            cpu_percent=cpu,
            per_core_percent=per_core,
            memory_used_bytes=int(memory.total - memory.available),
            memory_total_bytes=int(memory.total),
            memory_available_bytes=int(memory.available),
            disk_path=str(disk_path),
            disk_used_bytes=disk_used,
            disk_free_bytes=disk_free,
            disk_total_bytes=disk_total,
            net_sent_bytes=sent,
            net_recv_bytes=recv,
            interval_s=interval,
        )

    def close(self) -> None:
        """Nothing to release; here so every collector closes the same way."""
