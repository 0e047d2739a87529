"""One health sample from every configured collector, and its headline figures for telemetry.

:class:`HealthReadings` keeps each collector's readings whole (``as_dict`` for logs and tests);
:meth:`HealthReadings.telemetry_fields` picks one value per headline figure, preferring the most
direct source: jtop over sysfs for what only root can read (power mode, jetson_clocks), sysfs over
psutil on a Jetson, NVML on a dGPU host.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from agent.hardware.commands import Runner, default_runner
from agent.hardware.sim_profiles import PROFILES
from agent.telemetry.collectors.base import Collector, Readings
from agent.telemetry.collectors.host import HostCollector, HostReadings
from agent.telemetry.collectors.inference import InferenceCollector, InferenceReadings
from agent.telemetry.collectors.jetson_sysfs import (
    RELEASE_FILE,
    JetsonReadings,
    JetsonSysfsCollector,
)
from agent.telemetry.collectors.jtop_collector import JtopCollector, JtopReadings
from agent.telemetry.collectors.nvml_collector import NvmlCollector, NvmlReadings
from agent.telemetry.collectors.simulated import SimulatedJetsonSensors

log = logging.getLogger(__name__)

R = TypeVar("R", bound=Readings)


@dataclass(frozen=True)
class HealthReadings:
    """Every collector's readings for one sample; ``None`` where no collector is configured."""

    host: HostReadings | None = None
    jetson: JetsonReadings | None = None
    jtop: JtopReadings | None = None
    nvml: NvmlReadings | None = None
    inference: InferenceReadings | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain dicts, lists and numbers (JSON-ready)."""
        out = dataclasses.asdict(self)
        if self.inference is not None:  # its models are the wire ModelStats, not dataclasses
            out["inference"]["models"] = tuple(m.model_dump() for m in self.inference.models)
        return out

    def absent(self) -> dict[str, str]:
        """Each configured source that did not answer → why (for the operator, not a failure)."""
        out: dict[str, str] = {}
        for f in dataclasses.fields(self):
            readings = getattr(self, f.name)
            if readings is not None and not readings.available:
                out[f.name] = readings.reason or "no reason given"
        return out

    def telemetry_fields(self) -> dict[str, Any]:
        """The headline figures, named as the optional fields proposed for ``Telemetry``."""
        host = _ok(self.host)
        jetson = _ok(self.jetson)
        jtop = _ok(self.jtop)
        nvml = _ok(self.nvml)
        inference = _ok(self.inference)
        gpus = nvml.gpus if nvml else ()

        temperatures: dict[str, float] = {}
        if jetson:
            temperatures.update(jetson.temperatures_c)
        elif jtop:
            temperatures.update(jtop.temperatures_c)
        for gpu in gpus:
            if gpu.temperature_c is not None:
                temperatures[f"gpu{gpu.index}"] = gpu.temperature_c

        rails = (jetson.rails if jetson else ()) or (jtop.rails if jtop else ())
        blocks = (jetson.free_blocks if jetson else None) or (jtop.free_blocks if jtop else None)
        loads = [g.utilization_percent for g in gpus if g.utilization_percent is not None]
        gpu_used = [g.memory_used_bytes for g in gpus if g.memory_used_bytes is not None]
        gpu_total = [g.memory_total_bytes for g in gpus if g.memory_total_bytes is not None]
        gpu_power = [g.power_draw_mw for g in gpus if g.power_draw_mw is not None]

        return {
            "gpu_load_percent": _first(
                jtop.gpu_load_percent if jtop else None,
                jetson.gpu_load_percent if jetson else None,
                sum(loads) / len(loads) if loads else None,
            ),
            "gpu_memory_used_bytes": sum(gpu_used) if gpu_used else None,
            "gpu_memory_total_bytes": sum(gpu_total) if gpu_total else None,
            "temperatures_c": temperatures,
            "temperature_max_c": max(temperatures.values()) if temperatures else None,
            "power_mw": _first(
                jtop.power_total_mw if jtop else None,
                jetson.power_total_mw if jetson else None,
                float(sum(gpu_power)) if gpu_power else None,
            ),
            "power_rails_mw": {rail.name: rail.power_mw for rail in rails},
            "memory_available_bytes": _first(
                jetson.memory_available_bytes if jetson else None,
                host.memory_available_bytes if host else None,
            ),
            "nvmap_used_bytes": _first(
                jetson.nvmap_used_bytes if jetson else None,
                jtop.nvmap_used_bytes if jtop else None,
            ),
            "lfb_blocks": blocks.lfb_blocks if blocks else None,
            "lfb_block_bytes": blocks.lfb_block_bytes if blocks else None,
            "largest_free_block_bytes": blocks.largest_free_block_bytes if blocks else None,
            "disk_free_bytes": host.disk_free_bytes if host else None,
            "net_sent_bytes": host.net_sent_bytes if host else None,
            "net_recv_bytes": host.net_recv_bytes if host else None,
            "power_mode": _first(
                jtop.power_mode if jtop else None, jetson.power_mode if jetson else None
            ),
            "jetson_clocks": _first(
                jtop.jetson_clocks if jtop else None, jetson.jetson_clocks if jetson else None
            ),
            "queue_depth": inference.queue_depth if inference else None,
            "swaps": inference.swaps if inference else None,
            "latency_bounds_ms": inference.bounds_ms if inference else None,
            "sources_absent": self.absent(),
        }


def _ok(readings: R | None) -> R | None:
    return readings if readings is not None and readings.available else None


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _safely(collector: Collector[R] | None, absent: Callable[[str], R]) -> R | None:
    """Collect; a collector's own bug costs only its part of the sample, with the reason."""
    if collector is None:
        return None
    try:
        return collector.collect()
    except Exception as exc:  # one broken source must not stop telemetry
        log.exception("collector %s failed", type(collector).__name__)
        return absent(f"{type(collector).__name__} failed: {exc}")


class HealthSampler:
    """Runs the configured collectors once per sample.

    ``simulated`` (a simulated Jetson) answers the Jetson part of each sample in place of sysfs,
    from the host's and the serving's readings of the same sample.
    """

    def __init__(
        self,
        host: HostCollector | None = None,
        jetson: JetsonSysfsCollector | None = None,
        jtop: JtopCollector | None = None,
        nvml: NvmlCollector | None = None,
        inference: InferenceCollector | None = None,
        simulated: SimulatedJetsonSensors | None = None,
    ) -> None:
        self.host = host
        self.jetson = jetson
        self.jtop = jtop
        self.nvml = nvml
        self.inference = inference
        self.simulated = simulated

    def collect(self) -> HealthReadings:
        """One sample from every configured collector."""
        host = _safely(self.host, lambda r: HostReadings(available=False, reason=r))
        inference = _safely(self.inference, lambda r: InferenceReadings(available=False, reason=r))
        jetson = _safely(self.jetson, lambda r: JetsonReadings(available=False, reason=r))
        if self.simulated is not None:
            jetson = self.simulated.readings(host, inference)
        return HealthReadings(
            host=host,
            jetson=jetson,
            jtop=_safely(self.jtop, lambda r: JtopReadings(available=False, reason=r)),
            nvml=_safely(self.nvml, lambda r: NvmlReadings(available=False, reason=r)),
            inference=inference,
        )

    def close(self) -> None:
        """Close every collector (NVML shutdown, jtop disconnect)."""
        for collector in (self.host, self.jetson, self.jtop, self.nvml, self.inference):
            if collector is not None:
                collector.close()


def default_sampler(
    state_dir: Path,
    inference: InferenceCollector | None = None,
    root: Path = Path("/"),
    run: Runner = default_runner,
    mapping: Mapping[str, bool] | None = None,
    simulated_profile: str | None = None,
    seed: int | str = 0,
) -> HealthSampler:
    """The collectors that fit this machine: Jetson ones on a Jetson, NVML elsewhere.

    ``mapping`` can switch a collector off by name (``{"nvml": False}``) for tests or settings.
    A ``simulated_profile`` with an envelope (the Jetson ones) adds simulated temperature and
    power, their noise seeded by ``seed`` (the agent passes its device id).
    """
    enabled = {"host": True, "jetson": True, "jtop": True, "nvml": True, **(mapping or {})}
    on_jetson = (root / RELEASE_FILE).exists()
    profile = PROFILES[simulated_profile] if simulated_profile is not None else None
    simulated = None
    if profile is not None and profile.envelope is not None and enabled["jetson"] and not on_jetson:
        simulated = SimulatedJetsonSensors(profile, seed)
    return HealthSampler(
        host=HostCollector(state_dir) if enabled["host"] else None,
        jetson=JetsonSysfsCollector(root, run) if enabled["jetson"] and on_jetson else None,
        jtop=JtopCollector(root) if enabled["jtop"] and on_jetson else None,
        nvml=NvmlCollector() if enabled["nvml"] and not on_jetson else None,
        inference=inference,
        simulated=simulated,
    )
