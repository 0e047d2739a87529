"""``analyze(onnx_bytes, trt_version)``: the whole static delegate analysis as one JSON document.

:class:`AnalysisReport` is what the controller stores per model version and TensorRT version,
what ``jetfleet models analyze --json`` prints, and what the dashboard reads.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from controller.analysis import tensorrt_check
from controller.analysis.flops import FlopEstimate, node_flops, support_rates
from controller.analysis.graph import Graph, load_graph
from controller.analysis.ops_table import TRT_VERSIONS, load_ops_table
from controller.analysis.partition import partition_graph
from controller.analysis.prediction import (
    NestedNodeReport,
    PredictionReport,
    nested_reports,
    predict,
)
from controller.analysis.support import model_support
from controller.analysis.verdict import Thresholds, decide, top_unsupported

REPORT_VERSION = 2
"""2: ``prediction``, ``subgraph_nodes`` and the nodes' ``note`` (the fallback prediction)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OpCount(_Model):
    op_type: str
    count: int
    supported: int = Field(description="How many of these nodes go to TensorRT.")


class NodeReport(_Model):
    index: int = Field(description="Position in the ONNX graph's node list (TensorRT's node id).")
    name: str
    op_type: str
    placement: str = Field(description="GPU#k (partition k), CPU, or folded (a constant).")
    supported: bool
    reason: str | None = None
    flops: int | None = Field(default=None, description="None when the shapes are unknown.")
    note: str | None = Field(
        default=None,
        description="Supported, with something to know: folded by the agent before the build, "
        "needs an output allocator, If branch shapes unknown, ...",
    )


class PartitionReport(_Model):
    number: int = Field(description="1-based; partitions are sorted by node count, largest first.")
    nodes: list[int]
    op_types: dict[str, int]
    flops: int


class CrossingReport(_Model):
    tensor: str
    source: str = Field(description="CPU or GPU#k")
    target: str = Field(description="CPU or GPU#k")
    dtype: str
    shape: list[int | None] | None
    bytes: int = Field(description="Bytes per inference; unknown dims counted as 1.")
    exact: bool


class RatesReport(_Model):
    nodes_total: int = Field(description="Nodes that run (constant folds excluded).")
    nodes_supported: int
    node_share: float | None
    flops_total: int = Field(description="Estimated FLOPs of Conv, ConvTranspose, Gemm, MatMul.")
    flops_supported: int
    flop_share: float | None
    flops_exact: bool
    flops_at: str | None = Field(
        default=None,
        description="Input shapes FLOPs and bytes are counted at when an input has dynamic "
        "dims, and their origin, e.g. 'images=1x3x640x640 (default shapes for dynamic dims)'; "
        "None when the model fixes every input dim.",
    )


class UnsupportedOpReport(_Model):
    op_type: str
    count: int
    flops: int
    reasons: list[str]
    advice: str


class VerdictReport(_Model):
    kind: Literal["full", "partial", "not_worth"]
    line: str
    reasons: list[str]
    partitions: int
    crossings: int
    crossing_bytes: int


class DisagreementReport(_Model):
    index: int
    op_type: str
    static_supported: bool
    tensorrt_supported: bool


class TensorRTReport(_Model):
    """The installed TensorRT parser's judgement, where one was importable."""

    checked: bool
    version: str | None = None
    note: str | None = None
    supported_subgraphs: list[list[int]] = Field(default_factory=list)
    disagreements: list[DisagreementReport] = Field(default_factory=list)


class AnalysisReport(_Model):
    """Static analysis of one ONNX model against one TensorRT ONNX parser version."""

    report_version: int = REPORT_VERSION
    trt_version: str
    opset: int
    producer: str
    histogram: list[OpCount]
    nodes: list[NodeReport]
    partitions: list[PartitionReport]
    crossings: list[CrossingReport]
    rates: RatesReport
    verdict: VerdictReport
    top_unsupported: list[UnsupportedOpReport]
    tensorrt: TensorRTReport
    warnings: list[str]
    prediction: PredictionReport | None = Field(
        default=None,
        description="Whether the agent's TensorRT build takes the whole model or the slot falls "
        "back to ONNX Runtime, and why (None in reports stored before it existed).",
    )
    subgraph_nodes: list[NestedNodeReport] = Field(
        default_factory=list,
        description="Nodes inside If branches, Loop/Scan bodies and model-local functions.",
    )


def analyze(
    onnx_bytes: bytes,
    trt_version: str,
    *,
    thresholds: Thresholds | None = None,
    use_tensorrt: bool = True,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> AnalysisReport:
    """Analyse ``onnx_bytes`` for the TensorRT ONNX parser ``trt_version`` (8.5, 8.6 or 10.1).

    ``input_shapes`` (input name → dims: a config's shape profile ``opt``) is where FLOPs and
    bytes of inputs with dynamic dims are counted; other dynamic dims get the defaults of
    :mod:`controller.analysis.shapes`. The report names the shapes it used (``rates.flops_at``).

    Raises ``controller.errors.InvalidModel`` for bytes that are not ONNX and ValueError for an
    unknown ``trt_version``. With ``use_tensorrt`` and an importable TensorRT of the same version
    family, the parser's own verdict is attached and disagreements are listed.
    """
    if trt_version not in TRT_VERSIONS:
        raise ValueError(
            f"TensorRT version {trt_version!r} is not in the table; use one of "
            + ", ".join(TRT_VERSIONS)
        )
    return _analyze_graph(
        load_graph(onnx_bytes, input_shapes),
        onnx_bytes,
        trt_version,
        thresholds,
        use_tensorrt=use_tensorrt,
    )


def analyze_all(
    onnx_bytes: bytes, input_shapes: Mapping[str, Sequence[int]] | None = None
) -> dict[str, Any]:
    """Static delegate analysis for every TensorRT parser version in the table, as JSON.

    What the controller stores per pushed version. The controller has no GPU: TensorRT's own
    parser is not consulted (an agent with TensorRT can confirm it on the device). The graph is
    loaded (and shape-inferred) once for all versions.
    """
    graph = load_graph(onnx_bytes, input_shapes)
    return {
        v: _analyze_graph(graph, onnx_bytes, v, None, use_tensorrt=False).model_dump(mode="json")
        for v in TRT_VERSIONS
    }


def _analyze_graph(
    graph: Graph,
    onnx_bytes: bytes,
    trt_version: str,
    thresholds: Thresholds | None,
    *,
    use_tensorrt: bool,
) -> AnalysisReport:
    checked = model_support(graph, load_ops_table(), trt_version)
    support = checked.nodes
    supported = {s.index: s.supported for s in support}
    parts = partition_graph(graph, supported)
    estimates = {n.index: node_flops(graph, n) for n in graph.nodes}
    live = [n.index for n in graph.nodes if n.index not in parts.folded]
    rates = support_rates(estimates, supported, live)
    unsupported = top_unsupported(
        graph, [s for s in support if s.index not in parts.folded], estimates
    )
    verdict = decide(
        rates,
        len(parts.partitions),
        len(parts.crossings),
        parts.crossing_bytes,
        unsupported,
        thresholds,
        assumed=graph.assumed.describe() if graph.assumed else None,
    )
    histogram = Counter(n.op_type for n in graph.nodes)
    supported_count = Counter(n.op_type for n in graph.nodes if supported[n.index])
    warnings = list(graph.warnings)
    if rates.unknown_flop_nodes:
        warnings.append(
            f"{rates.unknown_flop_nodes} Conv/Gemm/MatMul node(s) have unknown shapes; their "
            "FLOPs are left out"
        )
    if graph.assumed is not None:
        warnings.append(
            f"inputs have dynamic dims: FLOPs and bytes are counted at {graph.assumed.describe()}"
        )
    if any(not c.exact for c in parts.crossings):
        warnings.append(
            "some crossing tensors have dynamic dims, counted at the assumed input shapes (or as "
            "1 where still unknown)"
        )
    return AnalysisReport(
        trt_version=trt_version,
        opset=graph.opset,
        producer=graph.producer,
        histogram=[
            OpCount(op_type=op, count=count, supported=supported_count[op])
            for op, count in sorted(histogram.items(), key=lambda kv: (-kv[1], kv[0]))
        ],
        nodes=[
            NodeReport(
                index=s.index,
                name=graph.nodes[s.index].name,
                op_type=graph.nodes[s.index].op_type,
                placement=parts.placement.get(s.index, "folded"),
                supported=s.supported,
                reason=s.reason,
                flops=None if estimates[s.index] is None else _flops(estimates[s.index]),
                note=s.note,
            )
            for s in support
        ],
        partitions=[
            PartitionReport(
                number=number,
                nodes=list(nodes),
                op_types=dict(Counter(graph.nodes[i].op_type for i in nodes)),
                flops=sum(_flops(estimates[i]) for i in nodes),
            )
            for number, nodes in enumerate(parts.partitions, start=1)
        ],
        crossings=[
            CrossingReport(
                tensor=c.tensor,
                source=c.source,
                target=c.target,
                dtype=c.dtype,
                shape=list(c.shape) if c.shape is not None else None,
                bytes=c.bytes,
                exact=c.exact,
            )
            for c in parts.crossings
        ],
        rates=RatesReport(
            nodes_total=rates.nodes_total,
            nodes_supported=rates.nodes_supported,
            node_share=rates.node_share,
            flops_total=rates.flops_total,
            flops_supported=rates.flops_supported,
            flop_share=rates.flop_share,
            flops_exact=rates.flops_exact,
            flops_at=graph.assumed.describe() if graph.assumed else None,
        ),
        verdict=VerdictReport(
            kind=verdict.kind,
            line=verdict.line,
            reasons=list(verdict.reasons),
            partitions=len(parts.partitions),
            crossings=len(parts.crossings),
            crossing_bytes=parts.crossing_bytes,
        ),
        top_unsupported=[
            UnsupportedOpReport(
                op_type=u.op_type,
                count=u.count,
                flops=u.flops,
                reasons=list(u.reasons),
                advice=u.advice,
            )
            for u in verdict.top_unsupported
        ],
        tensorrt=_tensorrt(onnx_bytes, graph, supported, trt_version)
        if use_tensorrt
        else TensorRTReport(checked=False, note="TensorRT check not requested"),
        warnings=warnings,
        prediction=predict(graph, checked),
        subgraph_nodes=nested_reports(checked),
    )


def _flops(estimate: FlopEstimate | None) -> int:
    return 0 if estimate is None else estimate.flops


def _tensorrt(
    onnx_bytes: bytes, graph: Graph, supported: dict[int, bool], trt_version: str
) -> TensorRTReport:
    version = tensorrt_check.installed_version()
    if version is None:
        return TensorRTReport(checked=False, note="TensorRT is not importable here")
    if tensorrt_check.version_family(version) != trt_version:
        return TensorRTReport(
            checked=False,
            version=version,
            note=f"installed TensorRT {version} is not the {trt_version} family analysed",
        )
    try:
        verdict = tensorrt_check.parser_verdict(onnx_bytes)
    except tensorrt_check.TensorRTUnavailable as exc:
        return TensorRTReport(checked=False, version=version, note=str(exc))
    op_types = {n.index: n.op_type for n in graph.nodes}
    return TensorRTReport(
        checked=True,
        version=verdict.version,
        supported_subgraphs=[list(nodes) for ok, nodes in verdict.subgraphs if ok],
        disagreements=[
            DisagreementReport(
                index=d.index,
                op_type=d.op_type,
                static_supported=d.static_supported,
                tensorrt_supported=d.tensorrt_supported,
            )
            for d in tensorrt_check.compare(supported, op_types, verdict)
        ],
    )


def resolve_trt_version(requested: str) -> str:
    """``auto`` → the importable TensorRT's family, else 10.1 (the JetPack 6 baseline)."""
    if requested != "auto":
        return requested
    version = tensorrt_check.installed_version()
    family = tensorrt_check.version_family(version) if version else None
    return family or "10.1"
