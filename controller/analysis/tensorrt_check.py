"""Adapter for ``tensorrt``: the installed ONNX parser's own partitioning, as ground truth.

Where ``import tensorrt`` works, ``parser.supports_model_v2`` (TensorRT >= 10.1; ``supports_model``
before) says which node groups the parser would take (docs/tensorrt.md#parser-support-queries). The
static table is then checked against it and every node where the two disagree is listed. The only
module of :mod:`controller.analysis` that imports TensorRT; :func:`compare` is pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.analysis.ops_table import TRT_VERSIONS


class TensorRTUnavailable(Exception):
    """TensorRT's Python package cannot be imported here; the message says how to get it."""


@dataclass(frozen=True)
class ParserVerdict:
    """What the installed parser said: its version and its subgraphs (supported?, node indices)."""

    version: str
    subgraphs: tuple[tuple[bool, tuple[int, ...]], ...]

    @property
    def supported_nodes(self) -> frozenset[int]:
        return frozenset(i for ok, nodes in self.subgraphs if ok for i in nodes)


@dataclass(frozen=True)
class Disagreement:
    """One node the static table and the real parser judge differently."""

    index: int
    op_type: str
    static_supported: bool
    tensorrt_supported: bool


def _import() -> Any:
    try:
        import tensorrt
    except ImportError as exc:
        raise TensorRTUnavailable(
            "TensorRT's Python package is not importable here (install JetPack's "
            "python3-libnvinfer or the tensorrt wheel); using the static table only"
        ) from exc
    return tensorrt


def installed_version() -> str | None:
    """The importable TensorRT's version string, or None."""
    try:
        return str(_import().__version__)
    except TensorRTUnavailable:
        return None


def version_family(version: str) -> str | None:
    """Which table column a TensorRT version reads: 8.5.x → 8.5, 8.6.x → 8.6, 10.x → 10.1."""
    parts = version.split(".")
    try:
        major, minor = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return None
    if major >= 10:
        return "10.1"
    family = f"{major}.{minor}"
    return family if family in TRT_VERSIONS else None


def parser_verdict(onnx_bytes: bytes) -> ParserVerdict:
    """Ask the installed TensorRT ONNX parser which node groups of the model it supports."""
    trt = _import()
    logger = trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(logger)
    major = int(str(trt.__version__).split(".")[0])
    flags = 0 if major >= 10 else 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    subgraphs: list[tuple[bool, tuple[int, ...]]] = []
    try:
        if hasattr(parser, "supports_model_v2"):
            parser.supports_model_v2(onnx_bytes)
            for i in range(parser.num_subgraphs):
                nodes = tuple(int(n) for n in parser.get_subgraph_nodes(i))
                subgraphs.append((bool(parser.is_subgraph_supported(i)), nodes))
        else:
            _ok, groups = parser.supports_model(onnx_bytes)
            subgraphs.extend((bool(ok), tuple(int(n) for n in nodes)) for nodes, ok in groups)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise TensorRTUnavailable(
            f"TensorRT {trt.__version__}'s parser could not check the model: {exc}"
        ) from exc
    return ParserVerdict(version=str(trt.__version__), subgraphs=tuple(subgraphs))


def compare(
    static: Mapping[int, bool], op_types: Mapping[int, str], verdict: ParserVerdict
) -> list[Disagreement]:
    """Nodes (by index) where the static table and the parser disagree, in graph order."""
    real = verdict.supported_nodes
    return [
        Disagreement(index, op_types.get(index, "?"), ok, index in real)
        for index, ok in sorted(static.items())
        if ok != (index in real)
    ]
