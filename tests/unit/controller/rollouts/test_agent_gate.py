"""Which build of an agent release a device gets, and why a device is skipped (pure)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from controller.records import AgentReleaseRecord, DeviceRecord
from controller.rollouts import agent_gate
from controller.rollouts.agent_gate import pick, why_not
from shared.facts import DeviceFacts, JetsonFacts

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def release(rid: int, arch: str, *jetpack: str) -> AgentReleaseRecord:
    return AgentReleaseRecord(
        rid, "0.3.0", arch, "deb", "a" * 64, 1, None, tuple(jetpack), {}, None, "op", T0
    )


def device(arch: str | None, jetpack: str | None = None) -> DeviceRecord:
    facts = None
    if arch is not None:
        jetson = JetsonFacts(jetpack=jetpack) if jetpack else None
        facts = DeviceFacts(hostname="h", os="Linux", arch=arch, jetson=jetson)
    return DeviceRecord("gw", {}, True, None, 0, None, None, (), device_facts=facts)


BUILDS = [release(1, "aarch64", "6"), release(2, "aarch64", "5"), release(3, "x86_64")]


def test_each_jetpack_line_gets_its_build() -> None:
    assert pick(device("aarch64", "6.2"), BUILDS) == BUILDS[0]
    assert pick(device("aarch64", "5.1.3"), BUILDS) == BUILDS[1]
    assert pick(device("x86_64"), BUILDS) == BUILDS[2]
    assert pick(device("arm64", "6.0"), BUILDS) == BUILDS[0]  # the kernel's other name


def test_devices_without_a_fitting_build_are_skipped_with_the_reason() -> None:
    assert pick(device("aarch64", "7.0"), BUILDS) == (
        "release 0.3.0 for aarch64 runs on JetPack 6; 5; the device has JetPack 7.0"
    )
    assert "no release 0.3.0 for its architecture aarch64 (pushed for: x86_64)" in str(
        pick(device("aarch64", "6.2"), [BUILDS[2]])
    )
    assert "architecture is unknown" in str(pick(device(None), BUILDS))


def test_too_old_and_already_running_agents_are_skipped() -> None:
    x86 = device("x86_64")
    assert why_not(x86, "0.2.0", BUILDS, "0.3.0") is None
    assert "older than 0.2.0, the first that updates itself" in str(
        why_not(x86, "0.1.9", BUILDS, "0.3.0")
    )
    assert why_not(x86, None, BUILDS, "0.3.0") == "it has not reported its agent version"
    assert why_not(x86, "0.3.0", BUILDS, "0.3.0") == "it already runs agent 0.3.0"
    assert why_not(x86, "0.3.0", BUILDS, "0.3.0", ordering=True) is None


@pytest.mark.parametrize(
    ("device_timeout_s", "bound"), [(600.0, 300), (300.0, 300), (120.5, 120), (5.0, 30)]
)
def test_a_new_release_must_confirm_before_the_rollout_gives_up_on_the_device(
    device_timeout_s: float, bound: int
) -> None:
    assert agent_gate.confirm_bound(device_timeout_s) == bound
