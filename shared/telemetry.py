"""The telemetry wire message: one health sample of a device and its models' counters.

Published on ``telemetry`` (docs/architecture.md#the-wire-contract); the controller stores each
``sample_id`` once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal

from pydantic import Field, NonNegativeInt

from shared.topics import DEVICE_ID_PATTERN
from shared.wire_model import MODEL_NAME_PATTERN, DeviceId, WireModel

SCHEMA_TELEMETRY: Final = "jetfleet/telemetry/1"


class ModelStats(WireModel):
    """Inference counters of one model since the previous sample (a window, not a total)."""

    name: str = Field(pattern=MODEL_NAME_PATTERN)
    version: str | None = None
    requests: int = Field(ge=0)
    errors: int = Field(ge=0)
    latency_p50_ms: float | None = Field(default=None, ge=0)
    latency_p95_ms: float | None = Field(default=None, ge=0)
    latency_p99_ms: float | None = Field(default=None, ge=0)
    latency_buckets: tuple[NonNegativeInt, ...] = Field(
        default=(),
        description="Successful requests per latency bucket in this window (not cumulative): "
        "bucket i counts latency_bounds_ms[i-1] < ms <= latency_bounds_ms[i], the last one those "
        "above the last bound; empty when the agent keeps no histogram.",
    )
    engine_key: str | None = Field(default=None, description="Engine key serving this model now.")


class Telemetry(WireModel):
    """One health sample. ``sample_id`` is the idempotency key: the controller stores it once."""

    schema_: Literal["jetfleet/telemetry/1"] = Field(default=SCHEMA_TELEMETRY, alias="schema")
    device_id: DeviceId = Field(pattern=DEVICE_ID_PATTERN)
    sample_id: str = Field(min_length=1, max_length=128)
    ts: datetime
    interval_s: float = Field(gt=0, description="Window the counters cover.")
    cpu_percent: float = Field(ge=0)
    memory_used_bytes: int = Field(ge=0)
    memory_total_bytes: int = Field(ge=0)
    models: tuple[ModelStats, ...] = ()
    gpu_load_percent: float | None = Field(
        default=None, ge=0, description="GPU load in percent (mean over GPUs on a dGPU host)."
    )
    gpu_memory_used_bytes: int | None = Field(
        default=None, ge=0, description="Discrete GPU memory in use, bytes (summed over GPUs)."
    )
    gpu_memory_total_bytes: int | None = Field(
        default=None, ge=0, description="Discrete GPU memory in total, bytes (summed over GPUs)."
    )
    memory_available_bytes: int | None = Field(
        default=None,
        ge=0,
        description="Memory available to new allocations, bytes (shared by CPU and GPU on Jetson).",
    )
    nvmap_used_bytes: int | None = Field(
        default=None, ge=0, description="Jetson NvMapMemUsed (GPU allocations), bytes."
    )
    lfb_blocks: int | None = Field(
        default=None, ge=0, description="Jetson largest free block, in blocks of lfb_block_bytes."
    )
    lfb_block_bytes: int | None = Field(
        default=None, ge=0, description="Size of one lfb block, bytes (4 MiB on Jetson)."
    )
    largest_free_block_bytes: int | None = Field(
        default=None,
        ge=0,
        description="Largest contiguous free memory block, bytes (fragmentation headroom).",
    )
    disk_free_bytes: int | None = Field(
        default=None, ge=0, description="Free bytes on the file system of the state directory."
    )
    net_sent_bytes: int | None = Field(
        default=None, ge=0, description="Bytes sent on all interfaces during the window."
    )
    net_recv_bytes: int | None = Field(
        default=None, ge=0, description="Bytes received on all interfaces during the window."
    )
    queue_depth: int | None = Field(
        default=None, ge=0, description="Inference requests waiting or running now."
    )
    swaps: int | None = Field(default=None, ge=0, description="Engine swaps during the window.")
    temperatures_c: dict[str, float] = Field(
        default_factory=dict, description="Temperature per sensor or GPU, degrees Celsius."
    )
    temperature_max_c: float | None = Field(
        default=None, description="Hottest of temperatures_c, degrees Celsius."
    )
    power_mw: float | None = Field(
        default=None, ge=0, description="Total board (Jetson) or GPU (dGPU) power, milliwatts."
    )
    power_rails_mw: dict[str, float] = Field(
        default_factory=dict, description="Power per rail (INA3221 hwmon / jtop), milliwatts."
    )
    power_mode: str | None = Field(default=None, description="Jetson nvpmodel mode name.")
    jetson_clocks: bool | None = Field(
        default=None, description="Whether jetson_clocks pins the clocks at their maximum."
    )
    latency_bounds_ms: tuple[float, ...] | None = Field(
        default=None,
        description="Upper bounds of the models' latency_buckets, milliseconds, ascending.",
    )
    sources_absent: dict[str, str] = Field(
        default_factory=dict,
        description="Each configured telemetry source that did not answer → why.",
    )
    spool_dropped: int | None = Field(
        default=None,
        ge=0,
        description="Messages the agent's offline spool dropped to stay within its bounds, ever.",
    )
