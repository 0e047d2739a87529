"""Simulated device profiles for the demo and fleet simulations, always labelled as simulated.

A profile supplies only hardware facts a CPU-only host cannot have (Jetson module, JetPack, power
mode, GPU); the host's real OS, architecture, CPU and memory stay as probed.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.facts import GpuFacts, JetsonFacts

_GIB = 1024**3


@dataclass(frozen=True)
class SimulatedProfile:
    """The hardware facts one simulated device class reports."""

    name: str
    description: str
    jetson: JetsonFacts | None
    gpu: GpuFacts
    tensorrt_version: str | None


PROFILES: dict[str, SimulatedProfile] = {
    p.name: p
    for p in (
        SimulatedProfile(
            name="orin-nano-8gb",
            description="Jetson Orin Nano 8GB, JetPack 6.2, 15W",
            jetson=JetsonFacts(
                module="NVIDIA Jetson Orin Nano 8GB",
                part_number="p3767-0003",
                soc="tegra234",
                jetpack="6.2",
                l4t="36.4.3",
                power_mode="15W",
                jetson_clocks=False,
                dla_cores=0,
            ),
            gpu=GpuFacts(
                name="Orin (nvgpu)",
                compute_capability="8.7",
                sm_count=8,
                memory_total_bytes=8 * _GIB,
                cuda_version="12.6",
            ),
            tensorrt_version="10.3.0",
        ),
        SimulatedProfile(
            name="orin-nx-16gb",
            description="Jetson Orin NX 16GB, JetPack 6.1, 25W",
            jetson=JetsonFacts(
                module="NVIDIA Jetson Orin NX 16GB",
                part_number="p3767-0000",
                soc="tegra234",
                jetpack="6.1",
                l4t="36.4.0",
                power_mode="25W",
                jetson_clocks=False,
                dla_cores=2,
            ),
            gpu=GpuFacts(
                name="Orin (nvgpu)",
                compute_capability="8.7",
                sm_count=8,
                memory_total_bytes=16 * _GIB,
                cuda_version="12.6",
            ),
            tensorrt_version="10.3.0",
        ),
        SimulatedProfile(
            name="x86-rtx",
            description="x86_64 host with an RTX A2000",
            jetson=None,
            gpu=GpuFacts(
                name="NVIDIA RTX A2000 (simulated)",
                compute_capability="8.6",
                sm_count=26,
                memory_total_bytes=12 * _GIB,
                cuda_version="12.4",
            ),
            tensorrt_version="10.3.0",
        ),
    )
}
"""Profile name → profile; ``JETFLEET_SIMULATED_PROFILE`` picks one."""
