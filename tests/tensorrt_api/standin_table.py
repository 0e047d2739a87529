"""The API table the stand-in is generated from: ``tests/fixtures/tensorrt_python_api.tsv``.

Written by ``tests/fixtures/extract_tensorrt_api.py`` from NVIDIA's binding sources and headers
per release tag (its docstring has the command that regenerates it).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

TSV = Path(__file__).resolve().parents[1] / "fixtures" / "tensorrt_python_api.tsv"
RELEASES = ("8.5.2", "8.6.1", "10.3.0", "10.13.3", "newest")
VERSIONS = {
    "8.5.2": "8.5.2.2",
    "8.6.1": "8.6.1.6",
    "10.3.0": "10.3.0.26",
    "10.13.3": "10.13.3.9",
    "newest": "11.1.0.106",
}


@dataclass(frozen=True)
class Row:
    module: str
    owner: str
    member: str
    kind: str
    args: str
    presence: dict[str, str]
    types: str = ""
    value: str = ""


def load_rows(path: Path = TSV) -> list[Row]:
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    rows = []
    for rec in csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE):
        rows.append(
            Row(
                rec["module"],
                rec["owner"],
                rec["member"],
                rec["kind"],
                rec["args"],
                {r: rec[r] for r in RELEASES},
                rec.get("types") or "",
                rec.get("value") or "",
            )
        )
    return rows


def kind_at(raw: str, release: str) -> str:
    """``readonly_property (property from 8.5.2; readonly_property from 10.3.0)`` at a release."""
    match = re.match(r"^(\w+) \((.*)\)$", raw)
    if not match:
        return raw
    kind = match.group(1)
    for part in match.group(2).split("; "):
        name, _, since = part.partition(" from ")
        if RELEASES.index(since) <= RELEASES.index(release):
            kind = name
    return kind


def overloads_at(raw: str, release: str) -> list[list[tuple[str, bool]]]:
    """Each overload's (name, has_default) list at ``release``; [[]] = no named arguments."""
    match = re.match(r"^(.*?)\s*(?:\[(.*)\])?$", raw)
    assert match
    current, older = match.group(1), match.group(2)
    signature = current
    for part in (older or "").split("; "):
        labels, _, sig = part.partition(": ")
        if release in labels.split(","):
            signature = sig
    if signature in ("", "()"):
        return [[]]
    return [
        [(n.rstrip("="), n.endswith("=")) for n in o.split(",")] for o in signature.split(" | ")
    ]
