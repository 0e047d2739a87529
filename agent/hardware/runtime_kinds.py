"""The inference runtimes the agent knows, keyed by name: one descriptor each, no string tests.

``onnxruntime`` and ``tensorrt`` are names on the wire (validity keys, reported slots, job specs)
and in the settings. What differs between them used to be asked as ``runtime == "tensorrt"`` in
eight modules; each question is now a field of :class:`RuntimeKind` (the model is Frigate's
detector registry keyed by type): which builder module a build runs as, whether it needs a CUDA
device, how admission estimates its activation memory, which validity key names its engines,
whether execution providers, thread counts and INT8 calibration caches apply, and which profiler
reads it. Look one up with :func:`runtime_kind`; a new runtime is one more entry in
:data:`RUNTIMES` (plus its builder and loader modules).

It sits in the lowest agent layer, beside :func:`agent.hardware.probe.choose_runtime`, so every
layer may use it: hardware (the choice), engines (identity, builds), runtimes (loading), swap,
jobs, the daemon and the doctor. It imports only :mod:`shared`; the builder module is a name run
as ``python -m`` in a child, never imported here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from shared import engine_validity
from shared.delegate import DelegateConfig
from shared.engine_keys import ValidityKey
from shared.facts import DeviceFacts

RuntimeName = Literal["onnxruntime", "tensorrt"]
ProfileSource = Literal["onnxruntime-profiler", "tensorrt-iprofiler"]


@dataclass(frozen=True)
class RuntimeKind:
    """What the agent needs to know about one runtime; the instances are :data:`RUNTIMES`."""

    name: RuntimeName
    """The name on the wire and in the settings (``runtime = ...``)."""
    label: str
    """The name for people, in messages."""
    builder: str
    """The module an engine build runs as (``python -m``; :mod:`agent.engines.build_runner`)."""
    needs_cuda_device: bool
    """It runs only where a CUDA device answers; its engines live in device memory."""
    activations_like_model: bool
    """Admission counts activation memory as large as the model file before the engine ran
    (ONNX Runtime's arenas grow on first use and cannot be asked); otherwise the loaded engine
    says (TensorRT's ``device_memory_size_v2``) and nothing is estimated up front."""
    execution_providers: bool
    """A delegate config chooses its execution providers (CPU, CUDA, TensorRT EP)."""
    intra_op_threads: bool
    """The ``intra_op_threads`` setting changes how it runs (a tuning row reports it)."""
    calibration_caches: bool
    """INT8 builds take the calibration cache a delegate config names, or calibrate from the
    version's sample inputs (:mod:`agent.engines.sample_calibration`)."""
    profiler: ProfileSource
    """The source a profiling job's result names."""
    validity: Callable[[DeviceFacts, DelegateConfig], ValidityKey]
    """Where an engine built here from a delegate config can run (:mod:`shared.engine_validity`)."""

    def activation_estimate(self, engine_bytes: int) -> int:
        """The activation bytes admission counts for an engine file of ``engine_bytes``."""
        return engine_bytes if self.activations_like_model else 0


def _ort_validity(facts: DeviceFacts, config: DelegateConfig) -> ValidityKey:
    return engine_validity.ort_validity(facts, config.onnxruntime.providers)


def _trt_validity(facts: DeviceFacts, config: DelegateConfig) -> ValidityKey:
    return engine_validity.trt_validity(facts, config.dla_core)


ONNXRUNTIME = RuntimeKind(
    name="onnxruntime",
    label="ONNX Runtime",
    builder="agent.engines.builder_ort",
    needs_cuda_device=False,
    activations_like_model=True,
    execution_providers=True,
    intra_op_threads=True,
    calibration_caches=False,
    profiler="onnxruntime-profiler",
    validity=_ort_validity,
)

TENSORRT = RuntimeKind(
    name="tensorrt",
    label="TensorRT",
    builder="agent.trt_host.build_child",
    needs_cuda_device=True,
    activations_like_model=False,
    execution_providers=False,
    intra_op_threads=False,
    calibration_caches=True,
    profiler="tensorrt-iprofiler",
    validity=_trt_validity,
)

RUNTIMES: Mapping[str, RuntimeKind] = MappingProxyType(
    {kind.name: kind for kind in (ONNXRUNTIME, TENSORRT)}
)
"""Every runtime the agent can build, load and serve with, by name."""


class UnknownRuntime(ValueError):
    """A runtime name the agent does not know (a typo in a setting or a spec)."""


def runtime_kind(name: str) -> RuntimeKind:
    """The descriptor of runtime ``name``; UnknownRuntime naming the known ones otherwise."""
    kind = RUNTIMES.get(name)
    if kind is None:
        raise UnknownRuntime(f"unknown runtime {name!r}: use one of {', '.join(RUNTIMES)}")
    return kind
