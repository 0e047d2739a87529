"""Probe what this gateway is (DeviceFacts) and which runtime it builds and serves with.

Host facts (OS, CPU, memory, ONNX Runtime) are read below ``root`` so tests can point the probe at
a fixture tree; hardware facts (Jetson, GPU, TensorRT) come from
:func:`agent.hardware.probe.probe_hardware`, whose every source is optional and says why when it
is absent. A simulated profile (demo only) overlays the hardware facts, marks the result
``simulated`` and says so in the overlaid sources. The runtime choice always follows the REAL
hardware: a simulated Orin on a CPU host still builds and serves with ONNX Runtime.
"""

from __future__ import annotations

import importlib.metadata
import platform
import socket
from dataclasses import dataclass
from pathlib import Path

import psutil

from agent.hardware.commands import Runner, default_runner
from agent.hardware.probe import HardwareFacts, RuntimeSetting, choose_runtime, probe_hardware
from agent.hardware.sim_profiles import PROFILES
from shared.delegate import Runtime
from shared.facts import DeviceFacts, FactSource

SIMULATED_SOURCES = (
    "jetson",
    "tensorrt",
    "nvml",
    "cuda",
    "cudart",
    "nvpmodel",
    "jetson_clocks",
)


@dataclass(frozen=True)
class Probed:
    """The device's facts, the real hardware behind them, and the runtime they imply."""

    facts: DeviceFacts
    hardware: HardwareFacts
    runtime: Runtime
    runtime_reason: str


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


def _distribution_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _host_facts(root: Path, hw: HardwareFacts) -> DeviceFacts:
    os_name, os_source = _os_name(root)
    trt_python = hw.tensorrt_python if hw.tensorrt_python and hw.tensorrt_python.usable else None
    ort_version = _distribution_version("onnxruntime")
    sources = {
        "os_release": os_source,
        "psutil": FactSource(available=True),
        "onnxruntime": FactSource(available=True)
        if ort_version
        else FactSource(available=False, reason="onnxruntime is not installed"),
        **hw.sources,
    }
    return DeviceFacts(
        hostname=socket.gethostname(),
        os=os_name,
        arch=platform.machine(),
        cpu_model=_cpu_model(root),
        cpu_count=psutil.cpu_count(logical=True),
        memory_total_bytes=int(psutil.virtual_memory().total),
        python_version=platform.python_version(),
        onnxruntime_version=ort_version,
        tensorrt_version=hw.tensorrt_version,
        tensorrt_python=trt_python.interpreter if trt_python else None,
        tensorrt_python_version=trt_python.python_version if trt_python else None,
        jetson=hw.jetson,
        gpu=hw.gpu,
        sources=sources,
    )


def simulate(facts: DeviceFacts, profile_name: str) -> DeviceFacts:
    """``facts`` with the hardware of simulated profile ``profile_name``, labelled as such."""
    profile = PROFILES[profile_name]
    why = f"simulated profile {profile.name!r} ({profile.description}): not probed"
    overlaid = {name: FactSource(available=False, reason=why) for name in SIMULATED_SOURCES}
    return facts.model_copy(
        update={
            "jetson": profile.jetson,
            "gpu": profile.gpu,
            "tensorrt_version": profile.tensorrt_version,
            "tensorrt_python": None,
            "tensorrt_python_version": None,
            "sources": {**facts.sources, **overlaid},
            "simulated": True,
            "profile": profile.name,
        }
    )


def probe(
    root: Path = Path("/"),
    simulated_profile: str | None = None,
    runtime: RuntimeSetting = "auto",
    run: Runner = default_runner,
    tensorrt_python: str | None = None,
) -> Probed:
    """Probe the host below ``root``; SettingsError when ``runtime`` cannot be honoured.

    ``tensorrt_python``: the setting of that name (None: search JetPack's interpreters)."""
    hw = probe_hardware(root, run, tensorrt_python=tensorrt_python)
    chosen, reason = choose_runtime(hw, runtime)
    facts = _host_facts(root, hw)
    if simulated_profile is not None:
        facts = simulate(facts, simulated_profile)
        reason = f"{reason} (the simulated profile does not change the runtime)"
    return Probed(facts=facts, hardware=hw, runtime=chosen, runtime_reason=reason)


def probe_facts(
    root: Path = Path("/"),
    simulated_profile: str | None = None,
    run: Runner = default_runner,
    tensorrt_python: str | None = None,
) -> DeviceFacts:
    """Only the facts of :func:`probe` (the runtime left to decide later)."""
    hw = probe_hardware(root, run, tensorrt_python=tensorrt_python)
    facts = _host_facts(root, hw)
    return simulate(facts, simulated_profile) if simulated_profile is not None else facts
