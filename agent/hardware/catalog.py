"""The packaged Jetson catalog: module part numbers and JetPack releases, for labelling.

The data (``data/jetson_modules.tsv``, ``data/jetpack_versions.tsv``) come from the public sources
named in their headers (docs/tensorrt.md#releases-per-jetpack-line). They label what the device
reports (a part number, an L4T version); they never replace a value the device itself answers,
because CUDA and TensorRT are upgradable on JetPack >= 5.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources

_UNKNOWN = "?"
_PART_NUMBER = re.compile(r"^p\d{4}-\d{4}$")


class CatalogError(ValueError):
    """A packaged TSV file is malformed (a packaging bug, not a device problem)."""


@dataclass(frozen=True)
class JetsonModule:
    """One row of ``jetson_modules.tsv``."""

    module: str
    part_number: str | None
    soc: str
    compute_capability: str | None
    dla_cores: int | None
    memory_gb: int | None
    power_modes_seen: str | None
    confidence: str


@dataclass(frozen=True)
class JetPackRelease:
    """One row of ``jetpack_versions.tsv``; ``None`` where the table says ``?``."""

    jetpack: str
    l4t: str
    cuda: str | None
    tensorrt: str | None
    cudnn: str | None
    ubuntu: str | None
    python: str | None
    confidence: str


def parse_tsv(text: str, *, source: str) -> list[dict[str, str]]:
    """Rows of a tab-separated table as dicts; ``#`` lines and blank lines are skipped."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    if not lines:
        raise CatalogError(f"{source}: no header row")
    header = lines[0].split("\t")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        cells = line.split("\t")
        if len(cells) != len(header):
            raise CatalogError(
                f"{source}: data row {number} has {len(cells)} cells, header has {len(header)}"
            )
        rows.append(dict(zip(header, cells, strict=True)))
    return rows


def _known(cell: str) -> str | None:
    cell = cell.strip()
    return None if cell in ("", _UNKNOWN) else cell


def _known_int(cell: str, *, source: str) -> int | None:
    value = _known(cell)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise CatalogError(f"{source}: expected an integer, got {cell!r}") from exc


def parse_modules(text: str) -> tuple[JetsonModule, ...]:
    """Parse ``jetson_modules.tsv``."""
    source = "jetson_modules.tsv"
    return tuple(
        JetsonModule(
            module=row["module"],
            part_number=_known(row["part_number"]),
            soc=row["soc"],
            compute_capability=_known(row["compute_capability"]),
            dla_cores=_known_int(row["dla_cores"], source=source),
            memory_gb=_known_int(row["memory_gb"], source=source),
            power_modes_seen=_known(row["power_modes_seen"]),
            confidence=row["confidence"],
        )
        for row in parse_tsv(text, source=source)
    )


def parse_releases(text: str) -> tuple[JetPackRelease, ...]:
    """Parse ``jetpack_versions.tsv``."""
    return tuple(
        JetPackRelease(
            jetpack=row["jetpack"],
            l4t=row["l4t"],
            cuda=_known(row["cuda"]),
            tensorrt=_known(row["tensorrt"]),
            cudnn=_known(row["cudnn"]),
            ubuntu=_known(row["ubuntu"]),
            python=_known(row["python"]),
            confidence=row["confidence"],
        )
        for row in parse_tsv(text, source="jetpack_versions.tsv")
    )


@dataclass(frozen=True)
class Catalog:
    """Look-ups over the two tables."""

    modules: tuple[JetsonModule, ...]
    releases: tuple[JetPackRelease, ...]

    def module_by_part(self, part_number: str) -> JetsonModule | None:
        """The module whose part number is ``part_number`` (e.g. ``p3767-0005``), if listed."""
        wanted = part_number.strip().lower()
        if not _PART_NUMBER.match(wanted):
            return None
        return next((m for m in self.modules if m.part_number == wanted), None)

    def release_by_l4t(self, l4t: str) -> JetPackRelease | None:
        """The JetPack release that ships L4T ``l4t`` (e.g. ``36.4.3`` → 6.2), if listed.

        ``36.4`` and ``36.4.0`` name the same release: a missing patch level reads as 0.
        """
        wanted = _l4t_triplet(l4t)
        if wanted is None:
            return None
        return next((r for r in self.releases if _l4t_triplet(r.l4t) == wanted), None)

    def compute_capability_of_soc(self, soc: str) -> str | None:
        """The GPU compute capability of a Jetson SoC (``tegra234`` → ``8.7``), if listed."""
        return next(
            (m.compute_capability for m in self.modules if m.soc == soc and m.compute_capability),
            None,
        )


def _l4t_triplet(version: str) -> tuple[int, int, int] | None:
    parts = version.strip().split(".")
    if not 2 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        return None
    numbers = [int(p) for p in parts] + [0] * (3 - len(parts))
    return numbers[0], numbers[1], numbers[2]


@functools.lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    """The catalog packaged with the agent (read once per process)."""
    data = resources.files("agent.hardware").joinpath("data")
    return Catalog(
        modules=parse_modules(data.joinpath("jetson_modules.tsv").read_text(encoding="utf-8")),
        releases=parse_releases(data.joinpath("jetpack_versions.tsv").read_text(encoding="utf-8")),
    )
