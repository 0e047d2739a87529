import pytest

from agent.hardware import jetson_text


@pytest.mark.parametrize(
    ("text", "l4t"),
    [
        (
            "# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64, "
            "DATE: Wed Jan  8 01:49:37 UTC 2025\n# KERNEL_VARIANT: oot\n",
            "36.4.3",
        ),
        (
            "# R35 (release), REVISION: 3.1, GCID: 32790763, BOARD: t186ref, EABI: aarch64, "
            "DATE: Wed Mar 15 07:54:12 UTC 2023",
            "35.3.1",
        ),
        ("# R32 (release), REVISION: 7.1, GCID: 29818004", "32.7.1"),
        ("Ubuntu 22.04", None),
        ("", None),
    ],
)
def test_l4t_from_release_file(text: str, l4t: str | None) -> None:
    assert jetson_text.l4t_from_release_file(text) == l4t


@pytest.mark.parametrize(
    ("text", "l4t"),
    [("36.4.3-20250107174145", "36.4.3"), ("35.3.1-20230319081403\n", "35.3.1"), ("", None)],
)
def test_l4t_from_dpkg_version(text: str, l4t: str | None) -> None:
    assert jetson_text.l4t_from_dpkg_version(text) == l4t


def test_device_tree_properties_drop_their_nul_terminators() -> None:
    assert jetson_text.device_tree_string(b"Jetson AGX Orin\0") == "Jetson AGX Orin"
    raw = b"nvidia,p3768-0000+p3767-0005\0nvidia,p3767-0005\0nvidia,tegra234\0"
    assert jetson_text.device_tree_strings(raw) == (
        "nvidia,p3768-0000+p3767-0005",
        "nvidia,p3767-0005",
        "nvidia,tegra234",
    )


@pytest.mark.parametrize(
    ("compatible", "dts", "part"),
    [
        (("nvidia,p3768-0000+p3767-0005-super", "nvidia,tegra234"), None, "p3767-0005"),
        (("nvidia,p3701-0005", "nvidia,tegra234"), None, "p3701-0005"),
        (("nvidia,tegra234",), "tegra234-p3768-0000+p3767-0004-nv.dts", "p3767-0004"),
        (("nvidia,tegra234",), None, None),
    ],
)
def test_module_part_number_is_the_module_not_the_carrier(
    compatible: tuple[str, ...], dts: str | None, part: str | None
) -> None:
    assert jetson_text.module_part_number(compatible, dts) == part


def test_soc_from_compatible() -> None:
    assert jetson_text.soc_from_compatible(("nvidia,p3509-0000+p3668-0000", "nvidia,tegra194")) == (
        "tegra194"
    )
    assert jetson_text.soc_from_compatible(("raspberrypi,4-model-b",)) is None


@pytest.mark.parametrize(
    ("text", "name", "mode_id"),
    [
        ("NV Power Mode: 15W\n0\n", "15W", 0),
        ("NV Power Mode: MAXN_SUPER\n2", "MAXN_SUPER", 2),
        ("NVPM WARN: fan mode is not set!\nNV Power Mode: 25W\n1\n", "25W", 1),
    ],
)
def test_power_mode_from_nvpmodel_query(text: str, name: str, mode_id: int) -> None:
    assert jetson_text.power_mode_from_query(text) == jetson_text.PowerMode(name, mode_id)


@pytest.mark.parametrize("text", ["NV Power Mode: 15W\n", "", "NVPM ERROR: bad config\n"])
def test_power_mode_needs_both_name_and_id(text: str) -> None:
    assert jetson_text.power_mode_from_query(text) is None


LOCKED = (
    "cpu0: Online=1 Governor=schedutil MinFreq=1984000 MaxFreq=1984000 CurrentFreq=1984000 "
    "IdleStates: WFI=0 c7=0\n"
    "cpu1: Online=0 Governor=schedutil MinFreq=115200 MaxFreq=1984000 CurrentFreq=729600 "
    "IdleStates: WFI=0 c7=0\n"
    "GPU MinFreq=918000000 MaxFreq=918000000 CurrentFreq=918000000\n"
)


def test_jetson_clocks_on_when_online_cpus_and_gpu_are_pinned_at_max() -> None:
    assert jetson_text.jetson_clocks_from_show(LOCKED) is True


def test_jetson_clocks_off_when_the_gpu_still_scales() -> None:
    text = LOCKED.replace("GPU MinFreq=918000000", "GPU MinFreq=306000000")
    assert jetson_text.jetson_clocks_from_show(text) is False


def test_jetson_clocks_unknown_without_clock_lines() -> None:
    assert jetson_text.jetson_clocks_from_show("SOC family:tegra234\n") is None
