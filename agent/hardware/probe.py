"""All hardware sources in one call, and the pure choice of inference runtime they imply.

:func:`probe_hardware` runs every probe (Jetson files and tools through ``root`` and ``run``;
TensorRT, CUDA Python, NVML and the driver's procfs on the live host) and merges their answers,
trusting a value the device measured over one the catalog only labels. TensorRT is asked
through the interpreter that can import it (:mod:`agent.hardware.trt_python`), never imported
here. :func:`choose_runtime` decides the runtime: TensorRT when it imports under
some interpreter and a CUDA device answers, else ONNX Runtime, always with the reason in words
(``jetfleet-agent probe`` prints it).
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
from agent.hardware.trt_python import TrtPython
from shared.facts import FactSource, GpuFacts, JetsonFacts

CUDA_SOURCES = ("cuda", "nvml", "cudart")
"""The sources that can say a CUDA device answers (cuda-python, NVML, the host's libcudart)."""

RuntimeSetting = Literal["auto", "onnxruntime", "tensorrt"]
"""The ``runtime`` setting: a name of :data:`~agent.hardware.runtime_kinds.RUNTIMES`, or auto."""


@dataclass(frozen=True)
class HardwareFacts:
    """What the hardware probe found; ``sources`` says, per source, why anything is missing.

    ``cuda_device`` is True when a CUDA device answered: CUDA Python or NVML in the agent, or
    libcudart under the TensorRT interpreter (what the host's CUDA layer loads) saw one. A
    TensorRT runtime that could be created is not enough: the host still needs libcudart.
    ``tensorrt_python``: the TensorRT interpreter search's answer (also when it found none
    usable; None when not probed).
    """

    jetson: JetsonFacts | None
    gpu: GpuFacts | None
    tensorrt_version: str | None
    sources: dict[str, FactSource] = field(default_factory=dict)
    cuda_device: bool = False
    tensorrt_python: TrtPython | None = None


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
    root: Path = Path("/"),
    run: Runner = default_runner,
    catalog: Catalog | None = None,
    tensorrt_python: str | None = None,
) -> HardwareFacts:
    """Probe every hardware source; never raises for a missing one (it is reported absent).

    ``tensorrt_python``: the setting of that name (None: search JetPack's interpreters)."""
    catalog = catalog or load_catalog()
    jetson = probe_jetson(root, run, catalog)
    tensorrt = probe_tensorrt(tensorrt_python)
    cuda = probe_cuda()
    nvml = probe_nvml()
    driver = probe_driver(root)
    sources = {
        **jetson.sources,
        TENSORRT.name: tensorrt.source,
        "cuda": cuda.source,
        "cudart": tensorrt.cudart,
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
        gpu=merge_gpu([nvml.gpu, cuda.gpu, tensorrt.gpu, driver_gpu, catalog_gpu]),
        tensorrt_version=tensorrt.version,
        sources=sources,
        cuda_device=cuda.gpu is not None or nvml.gpu is not None or tensorrt.cudart.available,
        tensorrt_python=tensorrt.python,
    )


def _why_no_device(hw: HardwareFacts) -> str:
    reasons = [
        f"{name}: {hw.sources[name].reason}"
        for name in CUDA_SOURCES
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
    found = hw.tensorrt_python
    under = (
        f" (host under {found.interpreter}, Python {found.python_version})"
        if found is not None and found.usable
        else ""
    )
    return trt, (
        f"{how}: {TENSORRT.label} {hw.tensorrt_version} imports and {device} answered{under}"
    )
