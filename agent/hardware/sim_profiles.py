"""Simulated device profiles for the demo and fleet simulations, always labelled as simulated.

A profile supplies only hardware facts a CPU-only host cannot have (Jetson module, JetPack, power
mode, GPU); the host's real OS, architecture, CPU and memory stay as probed. A Jetson profile also
carries its power and thermal envelope (:class:`SimulatedEnvelope`), from which
:mod:`agent.telemetry.collectors.simulated` makes temperature and power samples that follow the
simulated load.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.facts import GpuFacts, JetsonFacts

_GIB = 1024**3


@dataclass(frozen=True)
class SimulatedEnvelope:
    """Power and temperature of a simulated Jetson in its nvpmodel mode, idle to full load.

    Board input power (the ``VDD_IN`` rail) runs from ``idle_w`` to ``budget_w``, the mode's
    budget, which it never exceeds; ``rails`` splits the part above idle between the module's
    other INA3221 rails (fractions of that part, each rail also drawing its share of idle). The
    junction settles at ``ambient_c`` plus ``full_load_rise_c`` times the fraction of the budget
    drawn, with a thermal time constant of ``tau_s``. ``full_load_rps`` inference requests a
    second count as full load.
    """

    idle_w: float
    budget_w: float
    rails: tuple[tuple[str, float, float], ...]
    """(rail, share of idle power, share of the power above idle)."""
    ambient_c: float = 35.0
    full_load_rise_c: float = 35.0
    tau_s: float = 60.0
    full_load_rps: float = 100.0


_ORIN_RAILS = (("VDD_CPU_GPU_CV", 0.25, 0.70), ("VDD_SOC", 0.30, 0.15))
"""Orin Nano and NX: CPU, GPU and CV on one rail, the SoC on another (the rest: DRAM, IO)."""


@dataclass(frozen=True)
class SimulatedProfile:
    """The hardware facts one simulated device class reports."""

    name: str
    description: str
    jetson: JetsonFacts | None
    gpu: GpuFacts
    tensorrt_version: str | None
    envelope: SimulatedEnvelope | None = None
    """Power and thermal envelope (Jetson profiles); ``None``: no simulated sensors."""


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
            envelope=SimulatedEnvelope(idle_w=4.5, budget_w=15.0, rails=_ORIN_RAILS),
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
            envelope=SimulatedEnvelope(
                idle_w=5.5, budget_w=25.0, rails=_ORIN_RAILS, full_load_rps=200.0
            ),
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
