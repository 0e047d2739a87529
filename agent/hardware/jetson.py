"""Jetson facts: module, SoC, L4T/JetPack, power mode, jetson_clocks, DLA cores.

Files are read through ``root`` (``/`` on a device, a fixture tree in tests) and tools are run
through a :data:`~agent.hardware.commands.Runner`, so the whole probe runs anywhere. Sources, in
the order they are trusted: ``/etc/nv_tegra_release`` and ``/proc/device-tree`` (``jetson``),
``dpkg-query ... nvidia-l4t-core`` (``dpkg``), ``nvpmodel -q`` (``nvpmodel``),
``jetson_clocks --show`` (``jetson_clocks``), then jtop's service (``jtop``) for what the tools
could not answer. The catalog labels the module and the JetPack release.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent.hardware import jetson_text
from agent.hardware.catalog import Catalog, load_catalog
from agent.hardware.commands import Runner, default_runner, failure_reason
from agent.hardware.jtop_probe import JtopReading, probe_jtop
from shared.facts import FactSource, JetsonFacts

RELEASE_FILE = Path("etc/nv_tegra_release")
DEVICE_TREE = Path("proc/device-tree")
NVPMODEL_QUERY = ("nvpmodel", "-q")
JETSON_CLOCKS_SHOW = ("jetson_clocks", "--show")
DPKG_L4T_CORE = ("dpkg-query", "-W", "-f", "${Version}", "nvidia-l4t-core")

SOURCES = ("jetson", "dpkg", "nvpmodel", "jetson_clocks", "jtop")
NOT_A_JETSON = (
    "not a Jetson: no /etc/nv_tegra_release, no nvidia,tegra* entry in "
    "/proc/device-tree/compatible and no nvidia-l4t-core package"
)


@dataclass(frozen=True)
class JetsonProbe:
    """The Jetson facts (``None`` off a Jetson) and one :class:`FactSource` per source."""

    facts: JetsonFacts | None
    sources: dict[str, FactSource] = field(default_factory=dict)


def _absent(reason: str) -> FactSource:
    return FactSource(available=False, reason=reason)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _run_tool(run: Runner, argv: Sequence[str]) -> tuple[str | None, str | None]:
    """(output, None) when the tool answered 0, else (None, reason)."""
    returncode, output = run(argv)
    if returncode != 0:
        return None, failure_reason(argv, returncode, output)
    return output, None


def _unrecognised(argv: Sequence[str], output: str) -> str:
    first = next((line.strip() for line in output.splitlines() if line.strip()), "no output")
    return f"`{' '.join(argv)}` printed something unrecognised: {first!r}"


def probe_jetson(
    root: Path = Path("/"), run: Runner = default_runner, catalog: Catalog | None = None
) -> JetsonProbe:
    """Probe the Jetson sources under ``root``; every missing source carries its reason."""
    catalog = catalog or load_catalog()
    sources: dict[str, FactSource] = {}

    release = _read(root / RELEASE_FILE)
    l4t_file = (
        jetson_text.l4t_from_release_file(release.decode(errors="replace")) if release else None
    )
    model_raw = _read(root / DEVICE_TREE / "model")
    compatible = jetson_text.device_tree_strings(_read(root / DEVICE_TREE / "compatible") or b"")
    dts_raw = _read(root / DEVICE_TREE / "nvidia,dtsfilename")
    soc = jetson_text.soc_from_compatible(compatible)

    dpkg_out, dpkg_reason = _run_tool(run, DPKG_L4T_CORE)
    l4t_dpkg = jetson_text.l4t_from_dpkg_version(dpkg_out) if dpkg_out is not None else None
    if l4t_dpkg:
        sources["dpkg"] = FactSource(available=True)
    else:
        sources["dpkg"] = _absent(dpkg_reason or _unrecognised(DPKG_L4T_CORE, dpkg_out or ""))

    if release is None and soc is None and l4t_dpkg is None:
        sources["jetson"] = _absent(NOT_A_JETSON)
        for name in ("nvpmodel", "jetson_clocks", "jtop"):
            sources[name] = _absent("skipped: not a Jetson")
        return JetsonProbe(facts=None, sources=sources)
    sources["jetson"] = FactSource(available=True)

    power_mode: jetson_text.PowerMode | None = None
    nvp_out, nvp_reason = _run_tool(run, NVPMODEL_QUERY)
    if nvp_out is not None:
        power_mode = jetson_text.power_mode_from_query(nvp_out)
        nvp_reason = None if power_mode else _unrecognised(NVPMODEL_QUERY, nvp_out)
    sources["nvpmodel"] = _absent(nvp_reason) if nvp_reason else FactSource(available=True)

    clocks: bool | None = None
    jc_out, jc_reason = _run_tool(run, JETSON_CLOCKS_SHOW)
    if jc_out is not None:
        clocks = jetson_text.jetson_clocks_from_show(jc_out)
        jc_reason = None if clocks is not None else _unrecognised(JETSON_CLOCKS_SHOW, jc_out)
    sources["jetson_clocks"] = _absent(jc_reason) if jc_reason else FactSource(available=True)

    jtop_reading, sources["jtop"] = probe_jtop(root)
    from_jtop = jtop_reading or JtopReading()

    part = jetson_text.module_part_number(
        compatible, jetson_text.device_tree_string(dts_raw) if dts_raw else None
    )
    module = catalog.module_by_part(part) if part else None
    model = jetson_text.device_tree_string(model_raw) if model_raw else ""
    l4t = l4t_file or l4t_dpkg or from_jtop.l4t
    release_row = catalog.release_by_l4t(l4t) if l4t else None
    facts = JetsonFacts(
        module=module.module if module else (model or None),
        part_number=part,
        soc=soc or (module.soc if module else None),
        l4t=l4t,
        jetpack=release_row.jetpack if release_row else from_jtop.jetpack,
        power_mode=power_mode.name if power_mode else from_jtop.power_mode,
        power_mode_id=power_mode.id if power_mode else from_jtop.power_mode_id,
        jetson_clocks=clocks if clocks is not None else from_jtop.jetson_clocks,
        dla_cores=module.dla_cores if module else None,
    )
    return JetsonProbe(facts=facts, sources=sources)
