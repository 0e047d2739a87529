"""What a gateway is (``facts``): hardware, OS and runtimes, as the agent probes them.

:class:`DeviceFacts` travels inside every reported document
(:class:`shared.messages.ReportedState`); a source that did not answer says why in
:class:`FactSource`.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from shared.wire_model import WireModel

SCHEMA_FACTS: Final = "jetfleet/facts/1"


class FactSource(WireModel):
    """Whether one facts source answered, and why not when it did not."""

    available: bool
    reason: str | None = Field(default=None, description="Why the source is absent.")


class JetsonFacts(WireModel):
    """Jetson-specific facts (filled by the probe, or by a simulated profile)."""

    module: str | None = None
    part_number: str | None = None
    soc: str | None = None
    jetpack: str | None = None
    l4t: str | None = None
    power_mode: str | None = None
    power_mode_id: int | None = None
    jetson_clocks: bool | None = None
    dla_cores: int | None = None


class GpuFacts(WireModel):
    """The accelerator the engines target."""

    name: str | None = None
    compute_capability: str | None = None
    sm_count: int | None = None
    memory_total_bytes: int | None = None
    cuda_version: str | None = None
    driver_version: str | None = None


class DeviceFacts(WireModel):
    """What a gateway is: hardware, OS, runtimes. Absent sources say why."""

    schema_: Literal["jetfleet/facts/1"] = Field(default=SCHEMA_FACTS, alias="schema")
    hostname: str
    os: str
    arch: str
    cpu_model: str | None = None
    cpu_count: int | None = None
    memory_total_bytes: int | None = None
    python_version: str | None = None
    onnxruntime_version: str | None = None
    tensorrt_version: str | None = None
    tensorrt_python: str | None = Field(
        default=None,
        description="Interpreter the TensorRT host runs under (it imports tensorrt); None when "
        "none can. Added within jetfleet/facts/1: older documents lack it.",
    )
    tensorrt_python_version: str | None = Field(
        default=None, description="That interpreter's Python version (3.8 on JetPack 5.1)."
    )
    jetson: JetsonFacts | None = None
    gpu: GpuFacts | None = None
    sources: dict[str, FactSource] = Field(
        default_factory=dict, description="Per source (psutil, jetson, tensorrt, nvml...)."
    )
    simulated: bool = Field(
        default=False, description="True when a simulated profile supplied hardware facts."
    )
    profile: str | None = Field(default=None, description="Simulated profile name, if any.")
