import pytest

from agent.errors import SettingsError
from agent.hardware.probe import HardwareFacts, choose_runtime, merge_gpu, probe_hardware
from shared.facts import FactSource, GpuFacts, JetsonFacts
from tests.unit.agent.hardware.devices import JETSONS, X86, ReplayRunner, device_root

NO_TRT = FactSource(
    available=False,
    reason="TensorRT not importable (No module named 'tensorrt'): install JetPack's "
    "python3-libnvinfer or run with runtime onnxruntime",
)
NO_CUDA = FactSource(available=False, reason="CUDA: cudaGetDeviceCount failed: cudaErrorNoDevice")
ORIN = GpuFacts(name="Orin", compute_capability="8.7", sm_count=16)


def facts(*, trt: str | None, device: bool) -> HardwareFacts:
    return HardwareFacts(
        jetson=JetsonFacts(module="Jetson Orin NX 16GB"),
        gpu=ORIN if device else None,
        tensorrt_version=trt,
        sources={
            "tensorrt": FactSource(available=True) if trt else NO_TRT,
            "cuda": FactSource(available=True) if device else NO_CUDA,
            "nvml": FactSource(available=False, reason="NVML unavailable"),
        },
        cuda_device=device,
    )


def test_tensorrt_with_a_cuda_device_is_chosen() -> None:
    runtime, reason = choose_runtime(facts(trt="10.3.0.30", device=True))
    assert runtime == "tensorrt"
    assert reason == "chosen: TensorRT 10.3.0.30 imports and Orin answered"


def test_without_tensorrt_onnxruntime_is_chosen_and_the_fix_is_named() -> None:
    runtime, reason = choose_runtime(facts(trt=None, device=True))
    assert runtime == "onnxruntime"
    assert reason == NO_TRT.reason


def test_tensorrt_without_a_device_falls_back_and_says_why() -> None:
    runtime, reason = choose_runtime(facts(trt="10.3.0.30", device=False), "auto")
    assert runtime == "onnxruntime"
    assert reason.startswith("TensorRT 10.3.0.30 imports but no CUDA device answered")
    assert "cudaErrorNoDevice" in reason


def test_settings_can_force_onnxruntime_on_a_tensorrt_device() -> None:
    assert choose_runtime(facts(trt="10.3.0.30", device=True), "onnxruntime") == (
        "onnxruntime",
        "runtime = onnxruntime in the agent settings",
    )


def test_forcing_tensorrt_where_it_cannot_run_is_a_settings_error() -> None:
    with pytest.raises(SettingsError, match="tensorrt was requested but TensorRT not importable"):
        choose_runtime(facts(trt=None, device=True), "tensorrt")
    with pytest.raises(SettingsError, match="no CUDA device answered"):
        choose_runtime(facts(trt="10.3.0.30", device=False), "tensorrt")


def test_forcing_tensorrt_where_it_runs_says_so() -> None:
    runtime, reason = choose_runtime(facts(trt="10.3.0.30", device=True), "tensorrt")
    assert runtime == "tensorrt"
    assert reason.startswith("runtime = tensorrt in the agent settings")


def test_merge_gpu_prefers_earlier_sources_field_by_field() -> None:
    nvml = GpuFacts(name="NVIDIA H200", driver_version="570.1", compute_capability="9.0")
    cuda = GpuFacts(name="H200", compute_capability="9.0", sm_count=132)
    assert merge_gpu([nvml, cuda, None]) == GpuFacts(
        name="NVIDIA H200", compute_capability="9.0", sm_count=132, driver_version="570.1"
    )
    assert merge_gpu([None, GpuFacts()]) is None


# What each recorded board is, read off its fixture files (tests/fixtures/devices/<name>/): the
# device-tree model and compatible strings, nv_tegra_release or the nvidia-l4t-core package version
# (L4T, and the JetPack that ships it), `nvpmodel -q` and `jetson_clocks --show`. dla_cores: two
# on the Orin NX 16GB, AGX Orin and Xavier NX modules, none on the Orin Nano (NVIDIA's module
# data sheets). The x86 hosts have no device tree: no Jetson facts.
BOARD_FACTS: dict[str, JetsonFacts | None] = {
    "orin-nano-8gb": JetsonFacts(
        module="Jetson Orin Nano 8GB",  # compatible: nvidia,p3767-0003
        part_number="p3767-0003",
        soc="tegra234",
        l4t="36.4.3",  # nv_tegra_release: R36, REVISION: 4.3
        jetpack="6.2",
        power_mode="15W",  # nvpmodel -q: NV Power Mode: 15W / 0
        power_mode_id=0,
        jetson_clocks=False,  # GPU CurrentFreq 306 MHz below MaxFreq 624.75 MHz
        dla_cores=0,
    ),
    "orin-nx-16gb": JetsonFacts(
        module="Jetson Orin NX 16GB",  # compatible: nvidia,p3767-0000
        part_number="p3767-0000",
        soc="tegra234",
        l4t="36.4.0",  # no nv_tegra_release; nvidia-l4t-core 36.4.0-20240912212859
        jetpack="6.1",
        power_mode="MAXN",
        power_mode_id=0,
        jetson_clocks=True,  # every Min/Max/CurrentFreq equal, EMC FreqOverride=1
        dla_cores=2,
    ),
    "agx-orin-64gb": JetsonFacts(
        module="Jetson AGX Orin 64GB",  # compatible: nvidia,p3701-0005
        part_number="p3701-0005",
        soc="tegra234",
        l4t="35.3.1",  # nv_tegra_release: R35, REVISION: 3.1
        jetpack="5.1.1",
        power_mode="MAXN",
        power_mode_id=0,
        jetson_clocks=None,  # jetson_clocks not recorded on this board
        dla_cores=2,
    ),
    "xavier-nx": JetsonFacts(
        module="Jetson Xavier NX (devkit)",  # compatible: nvidia,p3509-0000+p3668-0000
        part_number="p3668-0000",
        soc="tegra194",
        l4t="35.4.1",  # nv_tegra_release: R35, REVISION: 4.1
        jetpack="5.1.2",
        power_mode="MODE_20W_6CORE",  # nvpmodel -q: ... / 8
        power_mode_id=8,
        jetson_clocks=None,
        dla_cores=2,
    ),
    "x86-dgpu": None,
    "plain-x86": None,
}


@pytest.mark.parametrize("device", JETSONS + X86)
def test_probe_hardware_reports_every_source_and_why_any_is_absent(device: str) -> None:
    hw = probe_hardware(device_root(device), ReplayRunner(device))
    expected = BOARD_FACTS[device]
    if hw.jetson is not None and expected is not None and hw.sources["tensorrt"].available:
        # a live TensorRT on this host answers the DLA count instead of the board's
        assert hw.jetson.model_copy(update={"dla_cores": None}) == expected.model_copy(
            update={"dla_cores": None}
        )
    else:
        assert hw.jetson == expected
    assert {"jetson", "nvpmodel", "jetson_clocks", "jtop", "dpkg"} <= set(hw.sources)
    assert {"tensorrt", "cuda", "nvml", "nvidia_driver"} <= set(hw.sources)
    for name, source in hw.sources.items():
        assert source.available or source.reason, f"{name} is absent without a reason"
    runtime, reason = choose_runtime(hw)
    if hw.tensorrt_version is None:
        assert runtime == "onnxruntime"
        assert "python3-libnvinfer" in reason


@pytest.mark.parametrize("device", JETSONS)
def test_a_jetson_without_cuda_python_still_reports_its_compute_capability(device: str) -> None:
    hw = probe_hardware(device_root(device), ReplayRunner(device))
    if hw.sources["cuda"].available or hw.sources["nvml"].available:
        pytest.skip("a live CUDA device answers on this host and takes precedence")
    assert hw.gpu is not None
    assert hw.gpu.compute_capability == ("7.2" if device == "xavier-nx" else "8.7")


def test_a_dgpu_without_nvml_is_named_by_the_driver() -> None:
    hw = probe_hardware(device_root("x86-dgpu"), ReplayRunner("x86-dgpu"))
    if hw.sources["nvml"].available or hw.sources["cuda"].available:
        pytest.skip("a live GPU answers on this host and takes precedence")
    assert hw.gpu == GpuFacts(name="NVIDIA RTX A2000 12GB", driver_version="550.54.15")
    assert hw.jetson is None


def test_plain_x86_has_no_gpu_facts() -> None:
    hw = probe_hardware(device_root("plain-x86"), ReplayRunner("plain-x86"))
    if hw.sources["nvml"].available or hw.sources["cuda"].available:
        pytest.skip("a live GPU answers on this host")
    assert hw.gpu is None
    assert not hw.cuda_device
