"""Host load for telemetry: CPU and memory use, read through psutil."""

from __future__ import annotations

from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class HostLoad:
    """CPU use since the previous call and memory in use now."""

    cpu_percent: float
    memory_used_bytes: int
    memory_total_bytes: int


def host_load() -> HostLoad:
    """Sample the host; the first call after start reports 0 % CPU (psutil needs a baseline)."""
    memory = psutil.virtual_memory()
    return HostLoad(
        cpu_percent=float(psutil.cpu_percent(interval=None)),
        memory_used_bytes=int(memory.total - memory.available),
        memory_total_bytes=int(memory.total),
    )
