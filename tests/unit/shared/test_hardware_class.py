from shared.facts import DeviceFacts, GpuFacts, JetsonFacts
from shared.hardware_class import hardware_class, slug


def facts(**kw: object) -> DeviceFacts:
    return DeviceFacts.model_validate({"hostname": "h", "os": "Linux", "arch": "aarch64", **kw})


def test_jetson_class_is_module_and_jetpack() -> None:
    jetson = JetsonFacts(module="Jetson Orin Nano 8GB", part_number="p3767-0003", jetpack="6.2")
    assert hardware_class(facts(jetson=jetson)) == "jetson-orin-nano-8gb/jp6.2"


def test_jetpack_upgrade_makes_another_class() -> None:
    old = JetsonFacts(module="Jetson Orin NX 16GB", jetpack="6.1")
    new = JetsonFacts(module="Jetson Orin NX 16GB", jetpack="6.2")
    assert hardware_class(facts(jetson=old)) != hardware_class(facts(jetson=new))


def test_dgpu_and_cpu_classes() -> None:
    gpu = GpuFacts(name="NVIDIA RTX A2000 (simulated)")
    assert hardware_class(facts(arch="x86_64", gpu=gpu)) == "nvidia-rtx-a2000"
    assert hardware_class(facts(arch="x86_64")) == "cpu-x86_64"
    assert slug("  Jetson AGX Orin 64GB ") == "jetson-agx-orin-64gb"
