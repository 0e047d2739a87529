"""All hardware sources in one call, and the pure choice of inference runtime they imply.

:func:`probe_hardware` runs every probe (Jetson files and tools through ``root`` and ``run``;
TensorRT, CUDA Python, NVML and the driver's procfs on the live host) and merges their answers,
trusting a value the device measured over one the catalog only labels. :func:`choose_runtime`
is the decision of issue 3 item 7: TensorRT when it imports and a CUDA device answers, else
ONNX Runtime, always with the reason in words (``jetfleet-agent probe`` prints it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agent.errors import SettingsError
from agent.hardware.catalog import Catalog, load_catalog
from agent.hardware.commands import Runner, default_runner
from agent.hardware.cuda_probe import probe_cuda
from agent.hardware.jetson import probe_jetson
from agent.hardware.nvidia_driver import probe_driver
from agent.hardware.nvml_probe import probe_nvml
from agent.hardware.runtime_kinds import ONNXRUNTIME, TENSORRT, RuntimeName
from agent.hardware.tensorrt_probe import probe_tensorrt
from shared.messages import FactSource, GpuFacts, JetsonFacts

RuntimeSetting = Literal["auto", "onnxruntime", "tensorrt"]
"""The ``runtime`` setting: a name of :data:`~agent.hardware.runtime_kinds.RUNTIMES`, or auto."""


@dataclass(frozen=True)
class HardwareFacts:
    """What the hardware probe found; ``sources`` says, per source, why anything is missing.

    ``cuda_device`` is True when a CUDA device answered: the CUDA runtime or NVML saw one, or a
    TensorRT runtime could be created (which needs one).
    """

    jetson: JetsonFacts | None
    gpu: GpuFacts | None
    tensorrt_version: str | None
    sources: dict[str, FactSource] = field(default_factory=dict)
    cuda_device: bool = False


def merge_gpu(candidates: Sequence[GpuFacts | None]) -> GpuFacts | None:
    """Field by field, the first known value in priority order; ``None`` when nothing is known."""
    merged: dict[str, object] = {}
    for name in GpuFacts.model_fields:
        merged[name] = next(
            (
                getattr(c, name)
                for c in candidates
                if c is not None and getattr(c, name) is not None
            ),
            None,
        )
    if all(value is None for value in merged.values()):
        return None
    return GpuFacts.model_validate(merged)


def probe_hardware(
    root: Path = Path("/"), run: Runner = default_runner, catalog: Catalog | None = None
) -> HardwareFacts:
    """Probe every hardware source; never raises for a missing one (it is reported absent)."""
    catalog = catalog or load_catalog()
    jetson = probe_jetson(root, run, catalog)
    tensorrt = probe_tensorrt()
    cuda = probe_cuda()
    nvml = probe_nvml()
    driver = probe_driver(root)
    sources = {
        **jetson.sources,
        TENSORRT.name: tensorrt.source,
        "cuda": cuda.source,
        "nvml": nvml.source,
        "nvidia_driver": driver.source,
    }

    jetson_facts = jetson.facts
    catalog_gpu = None
    if jetson_facts is not None:
        if tensorrt.dla_cores is not None:
            jetson_facts = jetson_facts.model_copy(update={"dla_cores": tensorrt.dla_cores})
        if jetson_facts.soc:
            capability = catalog.compute_capability_of_soc(jetson_facts.soc)
            catalog_gpu = GpuFacts(compute_capability=capability)
    driver_gpu = GpuFacts(
        name=driver.gpu_models[0] if driver.gpu_models else None, driver_version=driver.version
    )
    return HardwareFacts(
        jetson=jetson_facts,
        gpu=merge_gpu([nvml.gpu, cuda.gpu, driver_gpu, catalog_gpu]),
        tensorrt_version=tensorrt.version,
        sources=sources,
        cuda_device=cuda.gpu is not None or nvml.gpu is not None or tensorrt.runtime_created,
    )


def _why_no_device(hw: HardwareFacts) -> str:
    reasons = [
        f"{name}: {hw.sources[name].reason}"
        for name in ("cuda", "nvml")
        if name in hw.sources and hw.sources[name].reason
    ]
    return "; ".join(reasons) or "no CUDA source answered"


def choose_runtime(
    hw: HardwareFacts, override: RuntimeSetting | None = None
) -> tuple[RuntimeName, str]:
    """The runtime to build and serve with, and why.

    ``override`` is the agent's ``runtime`` setting; ``None`` and ``"auto"`` let the hardware
    decide. Forcing ``tensorrt`` where TensorRT or a CUDA device is missing is a settings error
    naming both fixes, rather than a build that fails later on every model.
    """
    ort, trt = ONNXRUNTIME.name, TENSORRT.name
    trt_reason = hw.sources.get(trt, FactSource(available=False)).reason
    if override == ort:
        return ort, f"runtime = {ort} in the agent settings"
    if hw.tensorrt_version is None:
        why = trt_reason or f"{TENSORRT.label} was not probed"
        if override == trt:
            raise SettingsError("runtime", f"{trt} was requested but {why}; or set runtime auto")
        return ort, why
    if not hw.cuda_device:
        why = (
            f"{TENSORRT.label} {hw.tensorrt_version} imports but no CUDA device answered "
            f"({_why_no_device(hw)})"
        )
        if override == trt:
            raise SettingsError(
                "runtime", f"{trt} was requested but {why}; set runtime {ort} or auto"
            )
        return ort, why
    device = (hw.gpu.name if hw.gpu else None) or "the CUDA device"
    how = f"runtime = {trt} in the agent settings" if override == trt else "chosen"
    return trt, f"{how}: {TENSORRT.label} {hw.tensorrt_version} imports and {device} answered"
