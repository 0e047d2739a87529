"""Health verdicts from presence, last contact and recent vitals (pure, clock injected)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from controller.errors import InvalidInput
from controller.fleet.health import HealthState, Vitals, assess
from controller.settings import HealthThresholds

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
T = HealthThresholds()


def verdict(vitals: Vitals | None = None, *, online: bool = True, silent_s: float = 5):
    return assess(
        online=online,
        last_seen=NOW - timedelta(seconds=silent_s),
        vitals=vitals,
        now=NOW,
        thresholds=T,
    )


def test_recent_contact_and_calm_vitals_are_healthy() -> None:
    calm = Vitals(
        samples=10,
        requests=1000,
        errors=3,
        p99_ms=40,
        temperature_c=60,
        memory_available_bytes=3 << 30,
        memory_total_bytes=8 << 30,
    )
    assert verdict(calm).state is HealthState.HEALTHY
    assert verdict(calm).reasons == ()


def test_offline_by_last_will_by_silence_and_never_seen() -> None:
    assert verdict(online=False).reasons == ("reported offline (agent disconnected)",)
    silent = verdict(silent_s=600)
    assert silent.state is HealthState.OFFLINE
    assert silent.reasons == ("nothing received for 10 min (limit 90 s)",)
    never = assess(online=False, last_seen=None, vitals=None, now=NOW, thresholds=T)
    assert never.reasons == ("never seen",)


def test_each_threshold_crossed_is_one_reason() -> None:
    sick = Vitals(
        samples=10,
        requests=100,
        errors=20,
        p99_ms=900,
        temperature_c=91.5,
        memory_available_bytes=200 << 20,
        memory_total_bytes=8 << 30,
    )
    result = verdict(sick)
    assert result.state is HealthState.DEGRADED
    assert result.reasons == (
        "error rate 20.0% (20/100 requests) above 5.0%",
        "p99 latency 900 ms above 500 ms",
        "temperature 91.5 °C above 85 °C",
        "memory headroom 2.4% (200 MiB free) below 10%",
    )


def test_error_rate_over_few_requests_is_not_judged() -> None:
    assert verdict(Vitals(samples=1, requests=2, errors=1)).state is HealthState.HEALTHY


def test_thresholds_come_from_the_environment_and_bad_values_name_the_fix() -> None:
    t = HealthThresholds.from_env(
        {"JETFLEET_HEALTH_TEMPERATURE_C": "70", "JETFLEET_HEALTH_MIN_REQUESTS": "5"}
    )
    assert (t.temperature_c, t.min_requests, t.p99_ms) == (70.0, 5, 500.0)
    with pytest.raises(InvalidInput, match="JETFLEET_HEALTH_P99_MS='fast' is not a number"):
        HealthThresholds.from_env({"JETFLEET_HEALTH_P99_MS": "fast"})
