from agent.hardware.nvidia_driver import (
    driver_version_from_text,
    gpu_model_from_information,
    probe_driver,
)
from tests.unit.agent.hardware.devices import device_root


def test_dgpu_driver_and_model_from_procfs() -> None:
    probe = probe_driver(device_root("x86-dgpu"))
    assert probe.source.available
    assert probe.version == "550.54.15"
    assert probe.gpu_models == ("NVIDIA RTX A2000 12GB",)


def test_no_driver_is_absent_with_the_path_it_looked_for() -> None:
    probe = probe_driver(device_root("plain-x86"))
    assert not probe.source.available
    assert "proc/driver/nvidia/version" in (probe.source.reason or "")
    assert probe.version is None


def test_open_kernel_module_version_line() -> None:
    text = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.133.20  Release Build\n"
    assert driver_version_from_text(text) == "570.133.20"


def test_information_without_a_model_line() -> None:
    assert gpu_model_from_information("IRQ: 158\n") is None
