"""Will the agent's TensorRT build take this model, or will the slot fall back to ONNX Runtime?

The agent builds the whole model with TensorRT's ONNX parser (runtime ``tensorrt``) and serves
it on ONNX Runtime when the parser or the builder refuses it, so one refused node anywhere (top
level, inside an ``If``/``Loop``/``Scan``, in a called function; folded constants included, since
the parser imports those too) means the slot falls back: the verdict's partial delegation is what
ONNX Runtime's TensorRT execution provider can do then, not what the agent's build does. The
reasons are the first refusals in TensorRT's words; the notes are what the agent changes before
the build (folded DequantizeLinear, renamed dims), what the engine needs (output allocators) and
what could not be checked. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from controller.analysis.graph import Graph
from controller.analysis.support import ModelSupport

MAX_REASONS = 5
MAX_NOTES = 8


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PredictionReport(_Model):
    """The agent's TensorRT build of this model on this TensorRT release, predicted."""

    tensorrt: Literal["builds", "falls_back"] = Field(
        description="builds: the TensorRT parser and builder take the whole model; falls_back: "
        "they refuse a node, and the slot serves the model on ONNX Runtime."
    )
    line: str = Field(description="'tensorrt: builds' or 'tensorrt: falls back to ONNX Runtime'.")
    refused: int = Field(
        description="Top-level nodes the parser refuses (one holding or calling a refused node "
        "counts)."
    )
    reasons: list[str] = Field(
        description="The first refusals, 'node: reason', in TensorRT's words where known."
    )
    notes: list[str] = Field(
        default_factory=list,
        description="Not refusals: what the agent changes before the build (folds, renamed "
        "dims), what the engine needs, and what could not be checked statically.",
    )


class NestedNodeReport(_Model):
    """A node inside an If branch, a Loop/Scan body or a model-local function's body."""

    path: str = Field(description="e.g. 'If_3/then_branch/Conv_1', 'function dom.Fn/Relu_0'.")
    op_type: str
    parent: int | None = Field(
        description="Index of the top-level node that holds it; None in a function body."
    )
    supported: bool
    reason: str | None = None
    note: str | None = None


def nested_reports(support: ModelSupport) -> list[NestedNodeReport]:
    return [
        NestedNodeReport(
            path=n.path,
            op_type=n.op_type,
            parent=n.parent,
            supported=n.support.supported,
            reason=n.support.reason,
            note=n.support.note,
        )
        for n in support.nested
    ]


def predict(graph: Graph, support: ModelSupport) -> PredictionReport:
    """Builds or falls back, with the first refusals and the notes."""
    refused = [s for s in support.nodes if not s.supported]
    reasons = [_reason(graph.nodes[s.index].name, s.reason or "") for s in refused]
    count = len(refused)
    if len(reasons) > MAX_REASONS:
        reasons = [*reasons[:MAX_REASONS], f"... and {count - MAX_REASONS} more refused node(s)"]
    labelled = [
        (graph.nodes[s.index].op_type, graph.nodes[s.index].name, s.note)
        for s in support.nodes
        if s.note
    ]
    labelled += [(n.op_type, n.path, n.support.note) for n in support.nested if n.support.note]
    notes = [*_grouped(labelled), *support.notes]
    if len(notes) > MAX_NOTES:
        notes = [*notes[:MAX_NOTES], f"... and {len(notes) - MAX_NOTES} more note(s)"]
    if count:
        return PredictionReport(
            tensorrt="falls_back",
            line="tensorrt: falls back to ONNX Runtime",
            refused=count,
            reasons=reasons,
            notes=notes,
        )
    return PredictionReport(
        tensorrt="builds", line="tensorrt: builds", refused=0, reasons=[], notes=notes
    )


def _reason(name: str, reason: str) -> str:
    """``node: reason`` (the reason names the operator, or the nested path from the node)."""
    return reason if reason.startswith(f"{name}/") else f"{name}: {reason}"


def _grouped(labelled: Sequence[tuple[str, str, str | None]]) -> list[str]:
    """One note per operator type: its first node's note, and how many more say the like."""
    first: dict[str, tuple[str, str]] = {}
    count: dict[str, int] = {}
    for op_type, where, note in labelled:
        if note is None:
            continue
        first.setdefault(op_type, (where, note))
        count[op_type] = count.get(op_type, 0) + 1
    out = []
    for op_type, (where, note) in first.items():
        more = count[op_type] - 1
        also = f" (and {more} more {op_type} node{'s' * (more != 1)})" if more else ""
        out.append(f"{where}: {note}{also}")
    return out
