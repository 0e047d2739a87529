"""Simulated Jetsons sample temperature and power: in the profile's envelope, with the load."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from agent.hardware.sim_profiles import PROFILES
from agent.telemetry.collectors.health import HealthReadings, default_sampler
from agent.telemetry.collectors.host import HostReadings
from agent.telemetry.collectors.inference import InferenceReadings
from agent.telemetry.collectors.simulated import PREFIX, SimulatedJetsonSensors, load_of
from agent.telemetry.loop import telemetry_sample
from shared.telemetry import ModelStats

TS = datetime(2025, 1, 1, tzinfo=timezone.utc)
JETSONS = [name for name, p in PROFILES.items() if p.jetson is not None]


def host(cpu: float) -> HostReadings:
    return HostReadings(available=True, cpu_percent=cpu, interval_s=10.0)


def served(requests: int) -> InferenceReadings:
    model = ModelStats(
        name="detector",
        version="1",
        requests=requests,
        errors=0,
        latency_p50_ms=1.0,
        latency_p95_ms=2.0,
        latency_p99_ms=3.0,
    )
    return InferenceReadings(available=True, models=(model,))


def test_every_jetson_profile_has_an_envelope() -> None:
    assert JETSONS
    assert all(PROFILES[name].envelope is not None for name in JETSONS)


@pytest.mark.parametrize("name", JETSONS)
def test_power_stays_in_the_nvpmodel_budget_and_temperatures_are_plausible(name: str) -> None:
    profile = PROFILES[name]
    envelope = profile.envelope
    jetson = profile.jetson
    assert envelope is not None
    assert jetson is not None
    sensors = SimulatedJetsonSensors(profile, seed=7)
    for load in [0.0] * 30 + [1.0] * 60 + [0.5] * 30:
        r = sensors.step(load, 10.0)
        assert r.available
        assert r.power_total_mw is not None
        assert envelope.idle_w * 1000 - 5 <= r.power_total_mw <= envelope.budget_w * 1000
        (total, *others) = r.rails
        assert total.name == f"{PREFIX}VDD_IN"
        assert total.power_mw == r.power_total_mw
        assert sum(rail.power_mw for rail in others) < total.power_mw
        assert set(r.temperatures_c) == {f"{PREFIX}tj", f"{PREFIX}gpu", f"{PREFIX}cpu"}
        assert all(25.0 <= t <= 85.0 for t in r.temperatures_c.values()), r.temperatures_c
        assert r.power_mode == jetson.power_mode


def test_power_and_temperature_follow_the_load() -> None:
    sensors = SimulatedJetsonSensors(PROFILES["orin-nano-8gb"], seed=1)
    idle = [sensors.step(0.0, 10.0) for _ in range(30)][-1]
    busy = [sensors.step(1.0, 10.0) for _ in range(30)]
    assert busy[-1].power_total_mw is not None
    assert idle.power_total_mw is not None
    assert busy[-1].power_total_mw > 2.5 * idle.power_total_mw  # 15 W mode, ~4.5 W idle
    assert busy[-1].power_total_mw >= 14_000
    hot, cool = max(busy[-1].temperatures_c.values()), max(idle.temperatures_c.values())
    assert hot > cool + 20
    first = max(busy[0].temperatures_c.values())
    assert cool < first < hot  # a thermal mass: it warms over minutes, not at once


def test_the_same_seed_and_loads_give_the_same_samples() -> None:
    loads = [0.1, 0.9, 0.4, 0.0, 1.0]

    def run(seed: int | str) -> list[object]:
        sensors = SimulatedJetsonSensors(PROFILES["orin-nx-16gb"], seed)
        return [sensors.step(load, 5.0) for load in loads]

    assert run("gw-1") == run("gw-1")
    assert run("gw-1") != run("gw-2")


def test_load_is_cpu_use_or_requests_against_full_load() -> None:
    assert load_of(host(20.0), None, 100.0) == pytest.approx(0.2)
    assert load_of(host(20.0), served(500), 100.0) == pytest.approx(0.5)  # 50 rps of 100
    assert load_of(host(20.0), served(5000), 100.0) == 1.0
    assert load_of(None, None, 100.0) == 0.0


def test_a_simulated_jetson_sample_carries_temperature_and_power(tmp_path: Path) -> None:
    sampler = default_sampler(
        tmp_path, mapping={"nvml": False}, simulated_profile="orin-nano-8gb", seed="gw-1"
    )
    assert sampler.simulated is not None
    jetson = sampler.simulated.readings(host(50.0), served(100))
    readings = HealthReadings(host=host(50.0), jetson=jetson, inference=served(100))
    sample = telemetry_sample("gw-1", "gw-1:b:1", TS, 10.0, readings, spool_dropped=None)
    assert sample.power_mw is not None
    assert 4_000 <= sample.power_mw <= 15_000
    assert sample.temperature_max_c is not None
    assert 30.0 <= sample.temperature_max_c <= 85.0
    assert set(sample.power_rails_mw) == {
        f"{PREFIX}VDD_IN",
        f"{PREFIX}VDD_CPU_GPU_CV",
        f"{PREFIX}VDD_SOC",
    }
    assert all(name.startswith(PREFIX) for name in sample.temperatures_c)
    assert (sample.gpu_load_percent, sample.power_mode) == (50.0, "15W")
    collected = sampler.collect().telemetry_fields()
    assert collected["power_mw"] is not None
    assert collected["temperature_max_c"] is not None
    sampler.close()


def test_no_simulated_sensors_without_a_jetson_profile_or_with_jetson_off(tmp_path: Path) -> None:
    assert default_sampler(tmp_path, mapping={"nvml": False}).simulated is None
    off = {"nvml": False, "jetson": False}
    assert (
        default_sampler(tmp_path, mapping=off, simulated_profile="orin-nx-16gb").simulated is None
    )
    x86 = default_sampler(tmp_path, mapping={"nvml": False}, simulated_profile="x86-rtx")
    assert x86.simulated is None
