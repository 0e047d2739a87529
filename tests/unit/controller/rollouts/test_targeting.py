"""Rollout targets: set-based selectors, hardware class and JetPack range."""

from __future__ import annotations

import pytest

from controller.errors import InvalidInput
from controller.rollouts.model import TargetSpec
from controller.rollouts.targeting import Candidate, parse_label_selector, select
from shared.facts import DeviceFacts, GpuFacts, JetsonFacts


def jetson(jp: str) -> DeviceFacts:
    return DeviceFacts(
        hostname="h",
        os="linux",
        arch="aarch64",
        jetson=JetsonFacts(module="Jetson Orin Nano 8GB", jetpack=jp),
    )


DEVICES = [
    Candidate("a", {"site": "x", "tier": "1"}, jetson("6.2")),
    Candidate("b", {"site": "y", "tier": "2"}, jetson("5.1.2")),
    Candidate(
        "c",
        {"site": "z"},
        DeviceFacts(hostname="h", os="linux", arch="x86_64", gpu=GpuFacts(name="RTX A2000")),
    ),
]


def test_selector_terms() -> None:
    assert select(TargetSpec(selector="site in (x, y)"), DEVICES) == ["a", "b"]
    assert select(TargetSpec(selector="site notin (x),tier!=2"), DEVICES) == ["c"]
    assert select(TargetSpec(selector="site=x,tier in (1,3)"), DEVICES) == ["a"]
    assert parse_label_selector("k=v").matches({"k": "v"})


def test_hardware_class_and_jetpack_range() -> None:
    assert select(TargetSpec(hardware_class="jetson-orin-nano-8gb/jp6.2"), DEVICES) == ["a"]
    assert select(TargetSpec(jetpack_min="6.0"), DEVICES) == ["a"]
    assert select(TargetSpec(jetpack_max="6.1"), DEVICES) == ["b"]


def test_a_device_without_readable_facts_matches_no_class_or_jetpack_condition() -> None:
    # No facts yet, or stored facts the controller cannot read (DeviceRecord.device_facts None).
    devices = [*DEVICES, Candidate("d", {"site": "x"}, None)]
    assert select(TargetSpec(hardware_class="jetson-orin-nano-8gb/jp6.2"), devices) == ["a"]
    assert select(TargetSpec(jetpack_min="5.0"), devices) == ["a", "b"]
    assert select(TargetSpec(selector="site=x"), devices) == ["a", "d"]


@pytest.mark.parametrize("bad", ["site in x", "site=", "=x", "site in ()"])
def test_bad_selector_named(bad: str) -> None:
    if bad == "site=":  # an empty value is a valid (empty-label) match
        assert parse_label_selector(bad).matches({"site": ""})
        return
    with pytest.raises(InvalidInput, match="invalid selector term"):
        parse_label_selector(bad)
