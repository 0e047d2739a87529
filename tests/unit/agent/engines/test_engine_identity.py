"""Engine keys from facts: what shares an engine and what must not."""

from __future__ import annotations

import pytest

from agent.engines.identity import IdentityError, identify, tuning_matches, tuning_tag
from agent.hardware.facts import simulate
from shared.delegate import DelegateConfig, OrtOptions
from shared.engine_keys import TuningTag
from shared.facts import DeviceFacts, GpuFacts, JetsonFacts

SHA = "a" * 64


def host(arch: str = "x86_64", ort: str | None = "1.20.1") -> DeviceFacts:
    return DeviceFacts(hostname="h", os="Debian 12", arch=arch, onnxruntime_version=ort)


def orin_nx(power_mode: str = "25W", trt: str = "10.3.0.30") -> DeviceFacts:
    return DeviceFacts(
        hostname="nx",
        os="Ubuntu 22.04",
        arch="aarch64",
        onnxruntime_version="1.20.1",
        tensorrt_version=trt,
        jetson=JetsonFacts(
            module="NVIDIA Jetson Orin NX 16GB",
            part_number="p3767-0000",
            jetpack="6.1",
            l4t="36.4.0",
            power_mode=power_mode,
            power_mode_id=3,
            jetson_clocks=False,
        ),
        gpu=GpuFacts(
            name="Orin (nvgpu)",
            compute_capability="8.7",
            sm_count=8,
            memory_total_bytes=16 * 1024**3,
            cuda_version="12.6.68",
        ),
    )


def test_ort_key_is_ort_version_arch_and_providers() -> None:
    identity = identify("onnxruntime", host(), SHA, DelegateConfig())
    v = identity.validity
    assert (v.runtime, v.runtime_version, v.platform) == ("onnxruntime", "1.20.1", "linux-x86_64")
    assert v.providers == ("CPUExecutionProvider",)
    assert v.compute_capability is None
    assert identify("onnxruntime", host(), SHA, DelegateConfig()).key == identity.key
    assert identify("onnxruntime", host(arch="aarch64"), SHA, DelegateConfig()).key != identity.key
    assert identify("onnxruntime", host(ort="1.21.0"), SHA, DelegateConfig()).key != identity.key
    cuda_first = DelegateConfig(
        onnxruntime=OrtOptions(providers=("CUDAExecutionProvider", "CPUExecutionProvider"))
    )
    assert identify("onnxruntime", host(), SHA, cuda_first).key != identity.key
    assert identify("onnxruntime", host(), "b" * 64, DelegateConfig()).key != identity.key


def test_simulated_twins_share_ort_engines_and_other_classes_do_not() -> None:
    nano_a = simulate(host(), "orin-nano-8gb")
    nano_b = simulate(host().model_copy(update={"hostname": "other"}), "orin-nano-8gb")
    nx = simulate(host(), "orin-nx-16gb")
    key_a = identify("onnxruntime", nano_a, SHA, DelegateConfig()).key
    assert identify("onnxruntime", nano_b, SHA, DelegateConfig()).key == key_a
    assert identify("onnxruntime", nx, SHA, DelegateConfig()).key != key_a
    validity = identify("onnxruntime", nano_a, SHA, DelegateConfig()).validity
    assert validity.device_name == "nvidia-jetson-orin-nano-8gb/jp6.2"
    assert validity.runtime_version == "1.20.1"


def test_tensorrt_key_carries_the_device_identity() -> None:
    v = identify("tensorrt", orin_nx(), SHA, DelegateConfig(dla_core=1, precision="fp16")).validity
    assert v.runtime_version == "10.3.0.30"
    assert v.platform == "linux-aarch64-tegra"
    assert (v.compute_capability, v.sm_count, v.memory_total_mib) == ("8.7", 8, 16384)
    assert (v.device_name, v.cuda_major, v.dla_core) == ("p3767-0000", 12, 1)
    base = identify("tensorrt", orin_nx(), SHA, DelegateConfig()).key
    assert identify("tensorrt", orin_nx(trt="10.3.0.31"), SHA, DelegateConfig()).key != base


def test_power_mode_changes_only_the_tuning_tag() -> None:
    a = identify("tensorrt", orin_nx("25W"), SHA, DelegateConfig())
    b = identify("tensorrt", orin_nx("15W"), SHA, DelegateConfig())
    assert a.key == b.key
    assert a.tuning.power_mode == "25W"
    assert not tuning_matches(a.tuning, b.tuning)
    assert tuning_matches(a.tuning, tuning_tag(orin_nx("25W")))
    assert tuning_matches(TuningTag(), tuning_tag(host()))


def test_tensorrt_without_a_known_gpu_names_the_fix() -> None:
    facts = orin_nx().model_copy(update={"gpu": None})
    with pytest.raises(IdentityError, match="run with runtime onnxruntime"):
        identify("tensorrt", facts, SHA, DelegateConfig())
    with pytest.raises(IdentityError, match="TensorRT version unknown"):
        identify("tensorrt", host(), SHA, DelegateConfig())
