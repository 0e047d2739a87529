"""Delegate config: how one model is handed to the accelerator on one device.

The knobs follow DOMAIN.md (precision, DLA, fallback, workspace, shapes, streams, power mode).
Runtimes are chosen by the ``runtime`` discriminator; the ONNX Runtime CPU path is the one that
runs everywhere, TensorRT arrives with the engine work.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Precision = Literal["fp32", "fp16", "int8"]
Runtime = Literal["onnxruntime", "tensorrt"]
Preference = Literal["sustained_throughput", "lowest_latency"]


class ShapeProfile(BaseModel):
    """Min/opt/max shape of one dynamic input (TensorRT optimisation profile)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: str = Field(description="Input tensor name.")
    min: tuple[int, ...] = Field(description="Smallest shape the engine accepts.")
    opt: tuple[int, ...] = Field(description="Shape the kernels are tuned for.")
    max: tuple[int, ...] = Field(description="Largest shape the engine accepts.")


class DelegateConfig(BaseModel):
    """The resolved per-device delegate configuration of one model slot."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    runtime: Runtime = Field(
        default="onnxruntime", description="Inference runtime the agent builds for."
    )
    precision: Precision = Field(default="fp32", description="Arithmetic precision.")
    dla_core: int | None = Field(
        default=None, ge=0, description="DLA core to use (Jetson Xavier/Orin), None for the GPU."
    )
    gpu_fallback: bool = Field(
        default=True, description="Run layers the DLA cannot run on the GPU instead of failing."
    )
    workspace_mb: int | None = Field(
        default=None, gt=0, description="Builder workspace limit in MiB; None = runtime default."
    )
    shapes: tuple[ShapeProfile, ...] = Field(
        default=(), description="Optimisation profiles for dynamic inputs."
    )
    streams: int = Field(default=1, ge=1, le=16, description="Concurrent execution contexts.")
    power_mode: str | None = Field(
        default=None, description="nvpmodel mode name the engine should be tuned under."
    )
    preference: Preference = Field(
        default="sustained_throughput", description="Steady frame rate or one fast answer."
    )
