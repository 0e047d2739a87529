"""Who may store an engine and who may pull it (pure), over emulated boards."""

from __future__ import annotations

import pytest

from agent.engines.identity import identify
from agent.hardware.facts import simulate
from agent.hardware.sim_profiles import PROFILES
from controller.errors import InvalidInput
from controller.records import may_replace
from controller.trust.engine_trust import (
    DEFAULT_TRUST,
    FLEET_DEFAULT,
    UNRECORDED,
    Provenance,
    Uploader,
    check_class,
    check_mode,
    check_upload,
    may_pull,
    provenance_of,
    status,
    trust_mode,
)
from shared.delegate import DelegateConfig, OrtOptions
from shared.engine_keys import ValidityKey
from shared.facts import DeviceFacts

SHA = "a" * 64
X86_CPU = DeviceFacts(hostname="cpu", os="Debian 12", arch="x86_64", onnxruntime_version="1.20.1")
ORIN_PROBED = DeviceFacts(
    hostname="orin", os="Ubuntu 22.04", arch="aarch64", onnxruntime_version="1.20.1"
)
BOARDS = {name: simulate(ORIN_PROBED, name) for name in PROFILES}
ORIN_NANO_TRT = ValidityKey(
    runtime="tensorrt",
    runtime_version="10.3.0",
    platform="linux-aarch64-tegra",
    compute_capability="8.7",
    sm_count=8,
    memory_total_mib=8192,
    device_name="p3767-0003",
    cuda_major=12,
)
"""The validity an Orin Nano 8GB's TensorRT build has (what the probe's attacker forged)."""


def device(name: str = "gw-1") -> Uploader:
    return Uploader("device", name)


def built_by(name: str, hw_class: str = "cpu-x86_64", approved: str | None = None) -> Provenance:
    return Provenance("device", name, hw_class, approved_by=approved)


@pytest.mark.parametrize("board", sorted(BOARDS))
@pytest.mark.parametrize("runtime", ["onnxruntime", "tensorrt"])
@pytest.mark.parametrize(
    "config",
    [
        DelegateConfig(),
        DelegateConfig(dla_core=0),
        DelegateConfig(onnxruntime=OrtOptions(providers=("CUDAExecutionProvider",))),
    ],
)
def test_an_honest_agent_may_store_what_it_builds(
    board: str, runtime: str, config: DelegateConfig
) -> None:
    facts = BOARDS[board]
    validity = identify(runtime, facts, SHA, config).validity
    decision = check_upload(device(), validity, facts)
    assert decision.allowed, decision.reason
    assert decision.hardware_class is not None
    assert provenance_of(device(), decision) == Provenance(
        "device", "gw-1", decision.hardware_class
    )


def test_the_probes_x86_cpu_gateway_may_not_store_an_orin_tensorrt_engine() -> None:
    decision = check_upload(device("x86-gw"), ORIN_NANO_TRT, X86_CPU)
    assert not decision.allowed
    assert decision.reason.startswith("device 'x86-gw' (class cpu-x86_64) reports no TensorRT")
    assert "p3767-0003" in decision.reason


def test_a_board_may_not_store_an_engine_for_another_board_and_the_reason_names_each_field() -> (
    None
):
    decision = check_upload(device("nx-1"), ORIN_NANO_TRT, BOARDS["orin-nx-16gb"])
    assert not decision.allowed
    assert "(class nvidia-jetson-orin-nx-16gb/jp6.1)" in decision.reason
    assert "validity.device_name is 'p3767-0003', its facts give 'p3767-0000'" in decision.reason
    assert "validity.memory_total_mib is 8192, its facts give 16384" in decision.reason
    assert "runtime_version" not in decision.reason


def test_an_onnxruntime_engine_of_another_class_is_refused() -> None:
    orin = identify("onnxruntime", BOARDS["orin-nano-8gb"], SHA, DelegateConfig()).validity
    decision = check_upload(device(), orin, X86_CPU)
    assert not decision.allowed
    assert "validity.device_name is 'nvidia-jetson-orin-nano-8gb/jp6.2'" in decision.reason
    assert "its facts give 'cpu-x86_64'" in decision.reason


def test_a_device_without_reported_facts_may_not_store_anything() -> None:
    own = identify("onnxruntime", X86_CPU, SHA, DelegateConfig()).validity
    decision = check_upload(device("new-gw"), own, None)
    assert not decision.allowed
    assert "device 'new-gw' has reported no facts yet" in decision.reason
    assert "must report" in decision.reason


def test_an_operator_may_store_any_engine() -> None:
    decision = check_upload(Uploader("operator", "ci"), ORIN_NANO_TRT, None)
    assert decision.allowed
    assert provenance_of(Uploader("operator", "ci"), decision) == Provenance("operator", "ci", None)


def test_the_default_is_approval_and_a_class_setting_beats_the_fleet_default() -> None:
    assert DEFAULT_TRUST == "approval"
    assert trust_mode({}, "cpu-x86_64") == "approval"
    assert trust_mode({FLEET_DEFAULT: "devices"}, "cpu-x86_64") == "devices"
    assert trust_mode({FLEET_DEFAULT: "devices", "cpu-x86_64": "approval"}, "cpu-x86_64") == (
        "approval"
    )
    assert trust_mode({"cpu-x86_64": "devices"}, None) == "approval"


def test_in_approval_mode_only_the_builder_pulls_a_pending_build() -> None:
    pending = built_by("gw-1")
    assert status(pending, "approval") == "pending"
    assert may_pull("gw-1", pending, "approval")
    assert not may_pull("gw-2", pending, "approval")
    assert may_pull(None, pending, "approval")


def test_an_approved_a_trusted_or_an_operators_build_reaches_every_twin() -> None:
    approved = built_by("gw-1", approved="alice")
    assert (status(approved, "approval"), may_pull("gw-2", approved, "approval")) == (
        "approved",
        True,
    )
    trusted = built_by("gw-1")
    assert (status(trusted, "devices"), may_pull("gw-2", trusted, "devices")) == ("trusted", True)
    ops = Provenance("operator", "ci", None)
    assert (status(ops, "approval"), may_pull("gw-2", ops, "approval")) == ("operator", True)


def test_a_build_stored_before_uploaders_were_recorded_waits_for_approval() -> None:
    assert status(UNRECORDED, "approval") == "pending"
    assert not may_pull("gw-2", UNRECORDED, "approval")
    assert may_pull("gw-2", UNRECORDED, "devices")


def test_only_an_operator_replaces_and_only_an_unapproved_device_build() -> None:
    ops = Provenance("operator", "ci", None)
    assert may_replace(built_by("gw-1"), ops)
    assert may_replace(UNRECORDED, ops)
    assert not may_replace(built_by("gw-1", approved="alice"), ops)
    assert not may_replace(ops, Provenance("operator", "other", None))
    assert not may_replace(built_by("gw-1"), built_by("gw-2"))


def test_class_names_and_modes_are_checked() -> None:
    assert check_class("jetson-orin-nano-8gb/jp6.2") == "jetson-orin-nano-8gb/jp6.2"
    assert check_class(FLEET_DEFAULT) == FLEET_DEFAULT
    with pytest.raises(InvalidInput, match="invalid hardware class 'Orin Nano'"):
        check_class("Orin Nano")
    assert check_mode("devices") == "devices"
    with pytest.raises(InvalidInput, match="expected devices or approval"):
        check_mode("always")
