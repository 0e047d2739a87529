"""Probe what this gateway is (DeviceFacts); sources that were not probed say why.

Files are read below ``root`` so tests can point the probe at a fixture tree. Jetson, TensorRT and
NVML probing arrive in a later issue: until then they are reported absent with the real reason,
never with invented values. A simulated profile (demo only) overlays hardware facts and marks the
result ``simulated``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
import socket
from pathlib import Path

import psutil

from agent.sim_profiles import PROFILES
from shared.messages import DeviceFacts, FactSource

NVML_REASON = "NVML not probed yet (arrives with the GPU facts issue)"


def _read(root: Path, relative: str) -> str | None:
    try:
        return (root / relative).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _os_name(root: Path) -> tuple[str, FactSource]:
    text = _read(root, "etc/os-release")
    if text is not None:
        for line in text.splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "PRETTY_NAME" and value.strip():
                return value.strip().strip('"'), FactSource(available=True)
    fallback = f"{platform.system()} {platform.release()}".strip()
    return fallback, FactSource(
        available=False, reason=f"{root / 'etc/os-release'} not found or without PRETTY_NAME"
    )


def _cpu_model(root: Path) -> str | None:
    text = _read(root, "proc/cpuinfo")
    if text is None:
        return platform.processor() or None
    for key in ("model name", "Model", "Hardware", "cpu model"):
        for line in text.splitlines():
            name, _, value = line.partition(":")
            if name.strip() == key and value.strip():
                return value.strip()
    return platform.processor() or None


def _jetson_source(root: Path) -> FactSource:
    release = root / "etc/nv_tegra_release"
    if not release.is_file():
        return FactSource(available=False, reason=f"{release} not found: not a Jetson")
    return FactSource(
        available=False,
        reason=f"{release} found but Jetson probing is not implemented yet (later issue)",
    )


def _tensorrt_source() -> FactSource:
    try:
        spec = importlib.util.find_spec("tensorrt")
    except (ImportError, ValueError) as exc:
        return FactSource(available=False, reason=f"tensorrt not importable: {exc}")
    if spec is None:
        return FactSource(
            available=False, reason="tensorrt not importable: No module named 'tensorrt'"
        )
    return FactSource(
        available=False,
        reason="tensorrt is installed but not probed yet (arrives with the TensorRT runtime)",
    )


def _distribution_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def probe_facts(root: Path = Path("/"), simulated_profile: str | None = None) -> DeviceFacts:
    """Probe the host below ``root``; overlay ``simulated_profile`` when given."""
    os_name, os_source = _os_name(root)
    ort_version = _distribution_version("onnxruntime")
    sources = {
        "os_release": os_source,
        "psutil": FactSource(available=True),
        "onnxruntime": FactSource(available=True)
        if ort_version
        else FactSource(available=False, reason="onnxruntime is not installed"),
        "jetson": _jetson_source(root),
        "tensorrt": _tensorrt_source(),
        "nvml": FactSource(available=False, reason=NVML_REASON),
    }
    facts = DeviceFacts(
        hostname=socket.gethostname(),
        os=os_name,
        arch=platform.machine(),
        cpu_model=_cpu_model(root),
        cpu_count=psutil.cpu_count(logical=True),
        memory_total_bytes=int(psutil.virtual_memory().total),
        python_version=platform.python_version(),
        onnxruntime_version=ort_version,
        sources=sources,
    )
    if simulated_profile is None:
        return facts
    profile = PROFILES[simulated_profile]
    why = f"simulated profile {profile.name!r} ({profile.description}): not probed"
    simulated_sources = {
        **sources,
        "jetson": FactSource(available=False, reason=why),
        "tensorrt": FactSource(available=False, reason=why),
        "nvml": FactSource(available=False, reason=why),
    }
    return facts.model_copy(
        update={
            "jetson": profile.jetson,
            "gpu": profile.gpu,
            "tensorrt_version": profile.tensorrt_version,
            "sources": simulated_sources,
            "simulated": True,
            "profile": profile.name,
        }
    )
