"""A device's validity keys from its facts (pure): where an engine it builds can run.

One derivation, used twice: the agent names the engines it builds and pulls with it
(``agent/engines/identity.py``), and the controller checks that an engine a device uploads was
built for that device's own validity (``controller/trust/engine_trust.py``). Two copies would drift,
and a drift would refuse honest uploads.

**ONNX Runtime.** Validity is ``runtime="onnxruntime"``, the ONNX Runtime version, ``linux-<arch>``
and the providers of the config (an optimised model saved for the CPU provider holds CPU-specific
fused kernels). A simulated profile cannot change any of those: they are the host's real ones.
One field is a deliberate exception: ``device_name`` is the device's
:func:`~shared.hardware_class.hardware_class`, which a simulated profile *does* change. The demo
and ``bench/engine_reuse.py`` simulate a fleet of hardware classes on one CPU host and must see
twins (two simulated Orin Nanos) share one engine while an Orin NX builds its own, as the real
TensorRT fleet would. On real hardware the class adds nothing the host does not already say, so
the only cost is that two CPU hosts of different classes do not share ORT engines.

**TensorRT.** Validity is the full TensorRT version, the platform (``linux-aarch64-tegra`` on a
Jetson), compute capability, SM count, device memory in MiB, device name (the Jetson part number or
the dGPU name), CUDA major and the DLA core of the config
(docs/tensorrt.md#what-an-engine-is-tied-to).

The providers and the DLA core are the build's choice (the delegate config); every other field
comes from the facts.
"""

from __future__ import annotations

from collections.abc import Sequence

from shared.engine_keys import ValidityKey
from shared.facts import DeviceFacts
from shared.hardware_class import hardware_class

_MIB = 1024 * 1024


class IdentityError(ValueError):
    """The facts lack something the engine key of the chosen runtime needs."""


def platform_of(facts: DeviceFacts, runtime: str) -> str:
    """``linux-<arch>``, or ``linux-aarch64-tegra`` for TensorRT on a Jetson."""
    if runtime == "tensorrt" and facts.jetson is not None:
        return f"linux-{facts.arch}-tegra"
    return f"linux-{facts.arch}"


def ort_validity(facts: DeviceFacts, providers: Sequence[str]) -> ValidityKey:
    """Validity of an ONNX Runtime optimised model saved for ``providers`` on this device."""
    if not facts.onnxruntime_version:
        raise IdentityError("onnxruntime is not installed: install jetfleet[agent]")
    return ValidityKey(
        runtime="onnxruntime",
        runtime_version=facts.onnxruntime_version,
        platform=platform_of(facts, "onnxruntime"),
        device_name=hardware_class(facts),
        providers=tuple(providers),
    )


def _cuda_major(version: str | None) -> int | None:
    if not version:
        return None
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else None


def trt_validity(facts: DeviceFacts, dla_core: int | None) -> ValidityKey:
    """Validity of a TensorRT plan built here (on ``dla_core``, if any); IdentityError when
    TensorRT or the GPU is unknown."""
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
        dla_core=dla_core,
    )
