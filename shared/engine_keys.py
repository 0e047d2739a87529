"""Engine identity: validity key, content key, tuning tag, engine key.

Why each part is there: docs/architecture.md#engine-identity.

- **validity**: where a built engine can run at all (runtime version, platform, GPU identity,
  CUDA major, DLA core). A mismatch means the engine must not be loaded.
- **content**: what was built (ONNX bytes + the build-relevant part of the delegate config +
  calibration cache, or the sample inputs INT8 was calibrated from on the device). A mismatch
  means it is another engine.
- **tuning tag**: the conditions the build was timed under (power mode, clocks, JetPack). It does
  not change validity: a device may serve an engine tuned under another power mode while it gets
  the matching one, and reports which it uses.

``engine_key = sha256(canonical({"validity": ..., "content": ...}))``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from shared.canonical import digest
from shared.delegate import BUILD_FIELDS, BUILD_FIELDS_IF_SET, DelegateConfig


class _Key(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def digest(self) -> str:
        """sha256 of the canonical JSON of this key."""
        return digest(self)


class ValidityKey(_Key):
    """Everything an engine is bound to; TensorRT refuses (or misbehaves) on any mismatch."""

    runtime: Literal["onnxruntime", "tensorrt"]
    runtime_version: str = Field(description="Full version, e.g. TensorRT 10.3.0.30.")
    platform: str = Field(description="OS and arch, e.g. linux-aarch64-tegra, linux-x86_64.")
    compute_capability: str | None = Field(default=None, description="e.g. 8.7; None on CPU.")
    sm_count: int | None = None
    memory_total_mib: int | None = Field(default=None, description="Device memory, MiB.")
    device_name: str | None = Field(
        default=None, description="Jetson part number (p3767-0005) or dGPU name."
    )
    cuda_major: int | None = None
    dla_core: int | None = None
    providers: tuple[str, ...] = Field(
        default=(), description="ONNX Runtime execution providers, in order."
    )
    hardware_compatibility: Literal["none", "ampere_plus", "same_compute_capability"] = "none"
    version_compatible: bool = False


class ContentKey(_Key):
    """What is built: model bytes, build-relevant config, calibration cache."""

    onnx_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    build_config: dict[str, object]
    calibration_sha256: str | None = None

    @classmethod
    def of(
        cls, onnx_sha256: str, config: DelegateConfig, calibration_sha256: str | None = None
    ) -> ContentKey:
        """The content key of building ``config`` from the ONNX bytes with ``onnx_sha256``.

        ``calibration_sha256``: the artifact INT8 is calibrated from when it is not the config's
        calibration cache: the reference NPZ whose sample inputs a device calibrates from
        (``agent.engines.sample_calibration``). None (every other build): the config's cache,
        if it names one, so the keys of engines built before sample calibration stay as
        they were."""
        dumped = config.model_dump(mode="json")
        defaults = DelegateConfig().model_dump(mode="json")
        build = {k: dumped[k] for k in BUILD_FIELDS}
        build.update({k: dumped[k] for k in BUILD_FIELDS_IF_SET if dumped[k] != defaults[k]})
        return cls(
            onnx_sha256=onnx_sha256,
            build_config=build,
            calibration_sha256=calibration_sha256 or config.calibration_cache_sha256,
        )


MAX_TUNING = 128
TUNING_PATTERN = rf"^[ -~]{{1,{MAX_TUNING}}}$"
"""A tuning tag (:meth:`TuningTag.label`: ``15W``, ``MAXN+clocks``, ``default``): 1 to
:data:`MAX_TUNING` printable ASCII characters, as the controller checks and its API declares."""


class TuningTag(_Key):
    """Conditions a build was timed under; metadata for choosing, never for validity."""

    power_mode: str | None = None
    power_mode_id: int | None = None
    jetson_clocks: bool | None = None
    jetpack: str | None = None
    l4t: str | None = None

    def label(self) -> str:
        """Short human form, e.g. ``15W+clocks``; ``default`` when nothing is known."""
        mode = self.power_mode or "default"
        return f"{mode}+clocks" if self.jetson_clocks else mode


def engine_key(validity: ValidityKey, content: ContentKey) -> str:
    """The engine's identity: one per (where it runs, what it is)."""
    return digest({"validity": validity.digest(), "content": content.digest()})
