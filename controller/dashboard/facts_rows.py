"""A device's facts as the dashboard shows them: labelled rows, "—" where a fact is absent.

Pure: :class:`~shared.facts.DeviceFacts` in, ``(key, label, text)`` rows out; the page escapes.
"""

from __future__ import annotations

from shared.facts import DeviceFacts, GpuFacts, JetsonFacts

ABSENT = "—"
"""What a row shows for a fact the device did not report."""

GIB = 1024**3


def _join(*parts: str | None, sep: str = " · ") -> str:
    return sep.join(p for p in parts if p) or ABSENT


def _gib(n: int | None) -> str | None:
    return None if n is None else f"{n / GIB:.1f} GiB"


def _gpu(gpu: GpuFacts | None) -> str:
    if gpu is None:
        return ABSENT
    cc = f"compute capability {gpu.compute_capability}" if gpu.compute_capability else None
    sms = f"{gpu.sm_count} SMs" if gpu.sm_count is not None else None
    return _join(gpu.name, cc, _gib(gpu.memory_total_bytes), sms)


def _module(j: JetsonFacts | None) -> str:
    if j is None:
        return ABSENT
    part = f"part {j.part_number}" if j.part_number else None
    soc = f"SoC {j.soc}" if j.soc else None
    return _join(j.module, part, soc)


def _jetpack(j: JetsonFacts | None) -> str:
    if j is None or (j.jetpack is None and j.l4t is None):
        return ABSENT
    return f"JetPack {j.jetpack or ABSENT} / L4T {j.l4t or ABSENT}"


def _power(j: JetsonFacts | None) -> str:
    if j is None:
        return ABSENT
    mode = f"nvpmodel {j.power_mode_id}" if j.power_mode_id is not None else None
    clocks = None
    if j.jetson_clocks is not None:
        clocks = f"jetson_clocks {'on' if j.jetson_clocks else 'off'}"
    return _join(j.power_mode, mode, clocks)


def _cuda(gpu: GpuFacts | None) -> str:
    if gpu is None:
        return ABSENT
    driver = f"driver {gpu.driver_version}" if gpu.driver_version else None
    return _join(gpu.cuda_version, driver)


def _tensorrt(f: DeviceFacts) -> str:
    python = None
    if f.tensorrt_python:
        python = f"host Python {f.tensorrt_python_version or '?'} ({f.tensorrt_python})"
    return _join(f.tensorrt_version, python)


def _cpu(f: DeviceFacts) -> str:
    cores = f"{f.cpu_count} cores" if f.cpu_count is not None else None
    return _join(f.cpu_model, cores, _gib(f.memory_total_bytes))


def fact_rows(facts: DeviceFacts, agent_version: str | None) -> list[tuple[str, str, str]]:
    """Every row of the facts table, in a fixed order, each ``(key, label, text)``."""
    j, gpu = facts.jetson, facts.gpu
    dla = str(j.dla_cores) if j is not None and j.dla_cores is not None else ABSENT
    absent = sorted(
        f"{name}: {source.reason or 'absent'}"
        for name, source in facts.sources.items()
        if not source.available
    )
    simulated = f"yes, profile {facts.profile or '?'}" if facts.simulated else "no"
    return [
        ("host", "Host", _join(facts.hostname, f"{facts.os} {facts.arch}")),
        ("cpu", "CPU / memory", _cpu(facts)),
        ("gpu", "GPU", _gpu(gpu)),
        ("module", "Jetson module", _module(j)),
        ("jetpack", "JetPack / L4T", _jetpack(j)),
        ("power_mode", "Power mode", _power(j)),
        ("cuda", "CUDA", _cuda(gpu)),
        ("dla", "DLA cores", dla),
        ("tensorrt", "TensorRT", _tensorrt(facts)),
        ("onnxruntime", "ONNX Runtime", facts.onnxruntime_version or ABSENT),
        ("python", "Python", facts.python_version or ABSENT),
        ("agent", "Agent version", agent_version or ABSENT),
        ("simulated", "Simulated", simulated),
        ("absent_sources", "Absent sources", "; ".join(absent) or ABSENT),
    ]
