"""Pure parsers for what a Jetson prints: release file, device tree, nvpmodel, jetson_clocks, dpkg.

Formats follow docs/tensorrt.md (#jetpack-and-l4t-on-the-device, #power-modes-nvpmodel) and the
regexes of jetson-stats and jetson-containers cited there. Every parser answers ``None`` for text it
does not recognise rather than guessing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TEGRA_RELEASE = re.compile(
    r"^#\s*R(?P<major>\d+)\s*\(release\),\s*REVISION:\s*(?P<rev>\d+(?:\.\d+)*)"
)
_L4T_VERSION = re.compile(r"^\d+\.\d+(?:\.\d+)?$")
_POWER_MODE = re.compile(r"NV Power Mode:\s*(?P<name>\S+)")
_CARRIER_AND_MODULE = re.compile(r"p\d{4}-\d{4}\+(?P<module>p\d{4}-\d{4})")
_PART = re.compile(r"^nvidia,(?P<part>p\d{4}-\d{4})$")
_SOC = re.compile(r"^nvidia,(?P<soc>tegra\d+)$")
_CPU_CLOCKS = re.compile(
    r"cpu\d+: Online=(?P<online>\d) Governor=\S+ MinFreq=(?P<min>\d+) MaxFreq=(?P<max>\d+) "
    r"CurrentFreq=(?P<cur>\d+)"
)
_GPU_CLOCKS = re.compile(r"GPU MinFreq=(?P<min>\d+) MaxFreq=(?P<max>\d+) CurrentFreq=(?P<cur>\d+)")


@dataclass(frozen=True)
class PowerMode:
    """The active nvpmodel mode: its name as nvpmodel spells it (``MAXN_SUPER``) and its id."""

    name: str
    id: int


def l4t_from_release_file(text: str) -> str | None:
    """``# R36 (release), REVISION: 4.3, ...`` → ``36.4.3`` (first line of nv_tegra_release)."""
    first = text.lstrip().splitlines()[0] if text.strip() else ""
    match = _TEGRA_RELEASE.match(first)
    return f"{match['major']}.{match['rev']}" if match else None


def l4t_from_dpkg_version(text: str) -> str | None:
    """``36.4.3-20250107174145`` (nvidia-l4t-core's package version) → ``36.4.3``."""
    version = text.strip().split("-", 1)[0]
    return version if _L4T_VERSION.match(version) else None


def device_tree_string(raw: bytes) -> str:
    """A device-tree string property: NUL-terminated bytes → text."""
    return raw.split(b"\0", 1)[0].decode("utf-8", errors="replace").strip()


def device_tree_strings(raw: bytes) -> tuple[str, ...]:
    """A device-tree string list (``compatible``): NUL-separated bytes → texts."""
    return tuple(
        part.decode("utf-8", errors="replace").strip() for part in raw.split(b"\0") if part.strip()
    )


def module_part_number(compatible: tuple[str, ...], dts_filename: str | None = None) -> str | None:
    """The module's part number, e.g. ``p3767-0003``.

    Board entries name ``<carrier>+<module>`` (``nvidia,p3768-0000+p3767-0003``); the module is
    the part after ``+``. A lone ``nvidia,pNNNN-NNNN`` entry and the ``nvidia,dtsfilename``
    property (``tegra234-p3768-0000+p3767-0005-nv.dts``) are the fallbacks.
    """
    for entry in compatible:
        match = _CARRIER_AND_MODULE.search(entry)
        if match:
            return match["module"]
    for entry in compatible:
        match = _PART.match(entry)
        if match:
            return match["part"]
    if dts_filename:
        match = _CARRIER_AND_MODULE.search(dts_filename)
        if match:
            return match["module"]
    return None


def soc_from_compatible(compatible: tuple[str, ...]) -> str | None:
    """``nvidia,tegra234`` in the compatible list → ``tegra234``."""
    for entry in compatible:
        match = _SOC.match(entry)
        if match:
            return match["soc"]
    return None


def power_mode_from_query(text: str) -> PowerMode | None:
    """``nvpmodel -q`` output (``NV Power Mode: 15W`` then the id on the next line) → mode.

    Warning lines nvpmodel prints before the answer (``NVPM WARN: ...``) are skipped.
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for index, line in enumerate(lines):
        match = _POWER_MODE.search(line)
        if match and index + 1 < len(lines) and lines[index + 1].isdigit():
            return PowerMode(name=match["name"], id=int(lines[index + 1]))
    return None


def jetson_clocks_from_show(text: str) -> bool | None:
    """Whether ``jetson_clocks --show`` output says the clocks are locked at their maximum.

    The rule is jetson-stats' ``jetson_clocks_alive``: every online CPU and the GPU run with
    min = max = current frequency. ``None`` when the output lists neither CPUs nor a GPU.
    """
    checks: list[bool] = []
    for match in _CPU_CLOCKS.finditer(text):
        if match["online"] == "1":
            checks.append(match["min"] == match["max"] == match["cur"])
    gpu = _GPU_CLOCKS.search(text)
    if gpu:
        checks.append(gpu["min"] == gpu["max"] == gpu["cur"])
    return all(checks) if checks else None
