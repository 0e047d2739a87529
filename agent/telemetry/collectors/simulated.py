"""Temperature and power of a simulated Jetson, following the load the agent really serves.

A simulated gateway (``JETFLEET_SIMULATED_PROFILE`` naming a Jetson profile) has no thermal zones
or INA3221 rails; without this its samples carry no temperature or power and the demo's charts
for them stay empty. :class:`SimulatedJetsonSensors` answers :class:`JetsonReadings` in their
place, from the profile's :class:`~agent.hardware.sim_profiles.SimulatedEnvelope`:

- load: the larger of the host's CPU use and the served requests per second against the
  envelope's ``full_load_rps`` (0 to 1);
- power: board input ``VDD_IN`` from idle to the nvpmodel mode's budget (never above it), the
  other rails their shares, with a little noise;
- temperature: the junction moves towards ambient plus the rise that power calls for, with the
  envelope's time constant (a thermal mass, not a jump), CPU and GPU zones a little below it.

Every sensor and rail name starts with :data:`PREFIX`, so a chart or a log line says the value
is simulated (the device's facts say so too: ``simulated`` and ``profile``). The noise comes from
one ``random.Random(seed)``: the same seed and the same loads give the same samples.
"""

from __future__ import annotations

import math
import random

from agent.hardware.sim_profiles import SimulatedEnvelope, SimulatedProfile
from agent.telemetry.collectors.host import HostReadings
from agent.telemetry.collectors.inference import InferenceReadings
from agent.telemetry.collectors.jetson_sysfs import JetsonReadings, RailReading

PREFIX = "sim:"
"""Marks every simulated sensor and rail name."""

DEFAULT_INTERVAL_S = 10.0
"""The step of the thermal model when the host sample gives no interval."""

_ZONE_OFFSETS_C = (("tj", 0.0), ("gpu", -0.5), ("cpu", -1.5))
_RAIL_MV = 5000


def _rail(name: str, watts: float) -> RailReading:
    """A rail at a fixed bus voltage; the current rounded down, so the power never rounds up."""
    current_ma = math.floor(watts * 1e6 / _RAIL_MV)
    return RailReading(f"{PREFIX}{name}", _RAIL_MV, current_ma, _RAIL_MV * current_ma / 1000)


def load_of(host: HostReadings | None, inference: InferenceReadings | None, rps: float) -> float:
    """The simulated load, 0 to 1: CPU use or requests per second against ``rps``."""
    cpu = (host.cpu_percent or 0.0) / 100 if host is not None and host.available else 0.0
    served = 0.0
    if inference is not None and inference.available:
        interval = (host.interval_s if host is not None else None) or DEFAULT_INTERVAL_S
        served = sum(m.requests for m in inference.models) / interval / rps
    return min(1.0, max(0.0, cpu, served))


class SimulatedJetsonSensors:
    """Thermal zones and power rails of one simulated Jetson; a sample per :meth:`readings`."""

    def __init__(self, profile: SimulatedProfile, seed: int | str) -> None:
        if profile.envelope is None or profile.jetson is None:
            raise ValueError(f"profile {profile.name} simulates no Jetson sensors")
        self.profile = profile
        self.envelope: SimulatedEnvelope = profile.envelope
        self._random = random.Random(seed)  # noqa: S311 - noise of a simulation, not a secret
        self._junction_c = self._settled_c(self.envelope.idle_w)

    def _settled_c(self, power_w: float) -> float:
        e = self.envelope
        return e.ambient_c + e.full_load_rise_c * power_w / e.budget_w

    def step(self, load: float, interval_s: float) -> JetsonReadings:
        """The sample after ``interval_s`` seconds at ``load`` (0 to 1)."""
        e = self.envelope
        load = min(1.0, max(0.0, load))
        noise = self._random.uniform(-0.03, 0.03) * (e.budget_w - e.idle_w)
        above_idle = min(e.budget_w - e.idle_w, max(0.0, load * (e.budget_w - e.idle_w) + noise))
        total_w = e.idle_w + above_idle
        rails = [_rail("VDD_IN", total_w)] + [
            _rail(name, e.idle_w * idle_share + above_idle * load_share)
            for name, idle_share, load_share in e.rails
        ]
        settle = 1 - math.exp(-max(interval_s, 0.0) / e.tau_s)
        self._junction_c += (self._settled_c(total_w) - self._junction_c) * settle
        temperatures = {
            f"{PREFIX}{zone}": round(self._junction_c + offset + self._random.uniform(-0.3, 0.3), 1)
            for zone, offset in _ZONE_OFFSETS_C
        }
        jetson = self.profile.jetson
        return JetsonReadings(
            available=True,
            gpu_load_percent=round(load * 100, 1),
            temperatures_c=temperatures,
            rails=tuple(rails),
            power_total_mw=rails[0].power_mw,
            power_mode=jetson.power_mode if jetson else None,
            power_mode_id=jetson.power_mode_id if jetson else None,
            jetson_clocks=jetson.jetson_clocks if jetson else None,
        )

    def readings(
        self, host: HostReadings | None, inference: InferenceReadings | None
    ) -> JetsonReadings:
        """The sample for this telemetry window, its load taken from the host and the serving."""
        interval = (host.interval_s if host is not None else None) or DEFAULT_INTERVAL_S
        return self.step(load_of(host, inference, self.envelope.full_load_rps), interval)
