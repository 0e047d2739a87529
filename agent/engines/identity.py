"""The engine key of one model slot on this device: validity from facts, content from config.

**ONNX Runtime.** Validity is ``runtime="onnxruntime"``, the ONNX Runtime version, ``linux-<arch>``
and the providers of the config's :class:`~shared.delegate.OrtOptions` (an optimised model saved
for the CPU provider holds CPU-specific fused kernels). A simulated profile cannot change any of
those: they are the host's real ones. One field is a deliberate exception: ``device_name`` is the
device's :func:`~shared.hardware_class.hardware_class`, which a simulated profile *does* change.
The demo and ``bench/engine_reuse.py`` simulate a fleet of hardware classes on one CPU host and
must see twins (two simulated Orin Nanos) share one engine while an Orin NX builds its own, as the
real TensorRT fleet would. On real hardware the class adds nothing the host does not already say,
so the only cost is that two CPU hosts of different classes do not share ORT engines.

**TensorRT.** Validity is the full TensorRT version, the platform (``linux-aarch64-tegra`` on a
Jetson), compute capability, SM count, device memory in MiB, device name (the Jetson part number
or the dGPU name), CUDA major and the DLA core of the config (tensorrt-notes.md §1.6).

**Tuning tag.** Power mode (name and id), jetson_clocks, JetPack and L4T: never validity.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.delegate import DelegateConfig
from shared.engine_keys import ContentKey, TuningTag, ValidityKey, engine_key
from shared.hardware_class import hardware_class
from shared.messages import DeviceFacts

_MIB = 1024 * 1024


class IdentityError(ValueError):
    """The facts lack something the engine key of the chosen runtime needs."""


@dataclass(frozen=True)
class EngineIdentity:
    """Everything that names one engine: validity, content, tuning and the resulting key."""

    validity: ValidityKey
    content: ContentKey
    tuning: TuningTag

    @property
    def key(self) -> str:
        """``engine_key(validity, content)``."""
        return engine_key(self.validity, self.content)

    @property
    def runtime(self) -> str:
        return self.validity.runtime


def tuning_tag(facts: DeviceFacts) -> TuningTag:
    """The conditions an engine built now would be tuned under."""
    jetson = facts.jetson
    if jetson is None:
        return TuningTag()
    return TuningTag(
        power_mode=jetson.power_mode,
        power_mode_id=jetson.power_mode_id,
        jetson_clocks=jetson.jetson_clocks,
        jetpack=jetson.jetpack,
        l4t=jetson.l4t,
    )


def platform_of(facts: DeviceFacts, runtime: str) -> str:
    """``linux-<arch>``, or ``linux-aarch64-tegra`` for TensorRT on a Jetson."""
    if runtime == "tensorrt" and facts.jetson is not None:
        return f"linux-{facts.arch}-tegra"
    return f"linux-{facts.arch}"


def ort_validity(facts: DeviceFacts, config: DelegateConfig) -> ValidityKey:
    """Validity of an ONNX Runtime optimised model (see the module docstring)."""
    if not facts.onnxruntime_version:
        raise IdentityError("onnxruntime is not installed: install jetfleet[agent]")
    return ValidityKey(
        runtime="onnxruntime",
        runtime_version=facts.onnxruntime_version,
        platform=platform_of(facts, "onnxruntime"),
        device_name=hardware_class(facts),
        providers=tuple(config.onnxruntime.providers),
    )


def _cuda_major(version: str | None) -> int | None:
    if not version:
        return None
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else None


def trt_validity(facts: DeviceFacts, config: DelegateConfig) -> ValidityKey:
    """Validity of a TensorRT plan; IdentityError when TensorRT or the GPU is unknown."""
    if not facts.tensorrt_version:
        raise IdentityError(
            "TensorRT version unknown: install JetPack's python3-libnvinfer or run with "
            "runtime onnxruntime"
        )
    gpu = facts.gpu
    if gpu is None or not gpu.compute_capability:
        raise IdentityError(
            "GPU compute capability unknown (no CUDA, NVML or Jetson catalog answer): "
            "check the CUDA driver or run with runtime onnxruntime"
        )
    jetson = facts.jetson
    device_name = (jetson.part_number if jetson else None) or gpu.name
    memory = gpu.memory_total_bytes if gpu.memory_total_bytes is not None else None
    return ValidityKey(
        runtime="tensorrt",
        runtime_version=facts.tensorrt_version,
        platform=platform_of(facts, "tensorrt"),
        compute_capability=gpu.compute_capability,
        sm_count=gpu.sm_count,
        memory_total_mib=memory // _MIB if memory is not None else None,
        device_name=device_name,
        cuda_major=_cuda_major(gpu.cuda_version),
        dla_core=config.dla_core,
    )


def identify(
    runtime: str, facts: DeviceFacts, onnx_sha256: str, config: DelegateConfig
) -> EngineIdentity:
    """The identity of building ``config`` from the ONNX ``onnx_sha256`` with ``runtime`` here."""
    validity = trt_validity(facts, config) if runtime == "tensorrt" else ort_validity(facts, config)
    return EngineIdentity(
        validity=validity,
        content=ContentKey.of(onnx_sha256, config),
        tuning=tuning_tag(facts),
    )


def tuning_matches(engine: TuningTag, device: TuningTag) -> bool:
    """Whether an engine tuned under ``engine`` runs under the conditions it was tuned for.

    Power mode (name, and id when both know it) and jetson_clocks count; JetPack/L4T cannot
    differ within one validity key (they fix the TensorRT version).
    """
    if engine.power_mode != device.power_mode:
        return False
    ids = (engine.power_mode_id, device.power_mode_id)
    if None not in ids and ids[0] != ids[1]:
        return False
    return engine.jetson_clocks == device.jetson_clocks
