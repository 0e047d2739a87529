"""The dashboard's facts table: readable rows for GPU, module, JetPack, power mode and more."""

from __future__ import annotations

from controller.dashboard.facts_rows import ABSENT, fact_rows
from shared.facts import DeviceFacts, FactSource, GpuFacts, JetsonFacts

ORIN = DeviceFacts(
    hostname="gw-1",
    os="Linux",
    arch="aarch64",
    cpu_model="ARMv8 Processor rev 1 (v8l)",
    cpu_count=6,
    memory_total_bytes=8 * 1024**3,
    python_version="3.10.12",
    onnxruntime_version="1.18.0",
    tensorrt_version="10.3.0",
    tensorrt_python="/usr/bin/python3",
    tensorrt_python_version="3.10.12",
    jetson=JetsonFacts(
        module="Jetson Orin Nano 8GB",
        part_number="p3767-0003",
        soc="tegra234",
        jetpack="6.2",
        l4t="36.4.3",
        power_mode="15W",
        power_mode_id=0,
        jetson_clocks=False,
        dla_cores=0,
    ),
    gpu=GpuFacts(
        name="Orin (nvgpu)",
        compute_capability="8.7",
        sm_count=8,
        memory_total_bytes=8 * 1024**3,
        cuda_version="12.6",
    ),
    sources={"nvml": FactSource(available=False, reason="no NVML on Jetson")},
    simulated=True,
    profile="orin-nano-8gb",
)


def rows(facts: DeviceFacts, agent: str | None = "0.3.0") -> dict[str, tuple[str, str]]:
    return {key: (label, text) for key, label, text in fact_rows(facts, agent)}


def test_a_jetson_reads_as_rows() -> None:
    shown = rows(ORIN)
    assert shown["gpu"] == ("GPU", "Orin (nvgpu) · compute capability 8.7 · 8.0 GiB · 8 SMs")
    assert shown["module"] == (
        "Jetson module",
        "Jetson Orin Nano 8GB · part p3767-0003 · SoC tegra234",
    )
    assert shown["jetpack"] == ("JetPack / L4T", "JetPack 6.2 / L4T 36.4.3")
    assert shown["power_mode"] == ("Power mode", "15W · nvpmodel 0 · jetson_clocks off")
    assert shown["cuda"] == ("CUDA", "12.6")
    assert shown["dla"] == ("DLA cores", "0")
    assert shown["tensorrt"][1] == "10.3.0 · host Python 3.10.12 (/usr/bin/python3)"
    assert shown["agent"] == ("Agent version", "0.3.0")
    assert shown["simulated"][1] == "yes, profile orin-nano-8gb"
    assert shown["absent_sources"][1] == "nvml: no NVML on Jetson"
    assert shown["cpu"][1] == "ARMv8 Processor rev 1 (v8l) · 6 cores · 8.0 GiB"


def test_absent_facts_show_a_dash_never_a_dict() -> None:
    shown = rows(DeviceFacts(hostname="gw-x86", os="Linux", arch="x86_64"), agent=None)
    for key in ("gpu", "module", "jetpack", "power_mode", "cuda", "dla", "tensorrt", "agent"):
        assert shown[key][1] == ABSENT, key
    assert shown["host"][1] == "gw-x86 · Linux x86_64"
    assert shown["simulated"][1] == "no"
    assert not any("{" in text for _, text in shown.values())


def test_a_partial_jetpack_keeps_the_known_half() -> None:
    shown = rows(
        DeviceFacts(hostname="h", os="Linux", arch="aarch64", jetson=JetsonFacts(jetpack="6.2"))
    )
    assert shown["jetpack"][1] == f"JetPack 6.2 / L4T {ABSENT}"
    assert shown["power_mode"][1] == ABSENT
