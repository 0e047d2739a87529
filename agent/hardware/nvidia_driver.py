"""The NVIDIA kernel driver as procfs shows it: driver version and GPU model, no library needed.

``/proc/driver/nvidia/version`` (``NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15 ...``)
and ``/proc/driver/nvidia/gpus/<bus>/information`` (``Model: NVIDIA H200``) exist wherever the
dGPU driver is loaded, so a gateway without NVML or CUDA Python still reports its GPU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from shared.facts import FactSource

DRIVER_DIR = Path("proc/driver/nvidia")
_VERSION = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(?P<version>\d+(?:\.\d+)+)")
_MODEL = re.compile(r"^Model:\s*(?P<model>.+?)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class DriverProbe:
    """The kernel driver's version and the model names of the GPUs it drives."""

    version: str | None
    gpu_models: tuple[str, ...]
    source: FactSource


def driver_version_from_text(text: str) -> str | None:
    """The version in ``/proc/driver/nvidia/version``'s first line, e.g. ``550.54.15``."""
    match = _VERSION.search(text)
    return match["version"] if match else None


def gpu_model_from_information(text: str) -> str | None:
    """The ``Model:`` line of ``/proc/driver/nvidia/gpus/<bus>/information``."""
    match = _MODEL.search(text)
    return match["model"] if match else None


def probe_driver(root: Path = Path("/")) -> DriverProbe:
    """Read the driver's procfs files under ``root``; absent with the reason when missing."""
    base = root / DRIVER_DIR
    try:
        version_text = (base / "version").read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        reason = f"no NVIDIA dGPU kernel driver ({base / 'version'}: {exc.strerror or exc})"
        return DriverProbe(None, (), FactSource(available=False, reason=reason))
    models = []
    for information in sorted((base / "gpus").glob("*/information")):
        try:
            model = gpu_model_from_information(information.read_text(encoding="utf-8"))
        except OSError:
            continue
        if model:
            models.append(model)
    return DriverProbe(
        driver_version_from_text(version_text), tuple(models), FactSource(available=True)
    )
