"""Which ONNX operators the TensorRT ONNX parser takes, per TensorRT version.

The table ships inside the package (``data/tensorrt_onnx_ops.tsv``, a copy of onnx-tensorrt's
``docs/operators.md`` at the 8.5, 8.6-EA and 10.1 GA releases): ``Y`` supported, ``N`` not,
``-`` not listed (the parser of that version does not know the operator). Only the 10.1 release
lists data types and restriction texts; the static checks in :mod:`controller.analysis.support`
apply the input restrictions per version as each release's importer source has them (TopK's K
and Pad's ``axes`` differ before 10.1; Conv never needed constant weights in these releases),
each with a unit test naming the source file and tag.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

TRT_VERSIONS: tuple[str, ...] = ("8.5", "8.6", "10.1")
"""TensorRT versions the table covers: 8.5 = JetPack 5.1, 10.1 ~ the JetPack 6.x baseline."""

_TYPE_TYPOS = {"INF64": "INT64"}


@dataclass(frozen=True)
class OpEntry:
    """One operator's row: support per TensorRT version, 10.1 data types and restrictions."""

    op: str
    support: dict[str, bool]
    listed: dict[str, bool]
    types: frozenset[str]
    restrictions: str

    def supported_in(self, trt_version: str) -> bool:
        return self.support.get(trt_version, False)

    def first_supported(self) -> str | None:
        """The oldest TensorRT version in the table whose parser supports this operator."""
        return next((v for v in TRT_VERSIONS if self.support.get(v)), None)


@dataclass(frozen=True)
class OpsTable:
    """The whole table, keyed by operator name (ONNX default domain)."""

    entries: dict[str, OpEntry]

    def get(self, op: str) -> OpEntry | None:
        return self.entries.get(op)


def parse_ops_table(text: str) -> OpsTable:
    """Parse the TSV text: ``#`` comment lines, one header line, one row per operator."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    if not lines:
        raise ValueError("operator table is empty")
    header = lines[0].split("\t")
    expected = ["op", *(f"trt{v}" for v in TRT_VERSIONS), "types_10.1", "restrictions_10.1"]
    if header != expected:
        raise ValueError(f"operator table header is {header}, expected {expected}")
    entries: dict[str, OpEntry] = {}
    for number, line in enumerate(lines[1:], start=2):
        cells = line.split("\t")
        cells += [""] * (len(expected) - len(cells))
        op, marks, types, restrictions = cells[0], cells[1:4], cells[4], cells[5]
        if any(m not in {"Y", "N", "-"} for m in marks):
            raise ValueError(f"operator table row {number} ({op}): marks {marks} not Y/N/-")
        if op in entries:
            raise ValueError(f"operator table lists {op} twice")
        entries[op] = OpEntry(
            op=op,
            support={v: m == "Y" for v, m in zip(TRT_VERSIONS, marks, strict=True)},
            listed={v: m != "-" for v, m in zip(TRT_VERSIONS, marks, strict=True)},
            types=frozenset(
                _TYPE_TYPOS.get(t.strip(), t.strip()) for t in types.split(",") if t.strip()
            ),
            restrictions=restrictions.strip(),
        )
    return OpsTable(entries)


@lru_cache(maxsize=1)
def load_ops_table() -> OpsTable:
    """The table shipped with the package (parsed once per process)."""
    text = (
        resources.files("controller.analysis")
        .joinpath("data/tensorrt_onnx_ops.tsv")
        .read_text(encoding="utf-8")
    )
    return parse_ops_table(text)
