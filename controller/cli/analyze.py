"""``jetfleet models analyze PATH|NAME:VERSION``: how much of a model TensorRT can take, and
whether the agent's TensorRT build of it will build or fall back to ONNX Runtime."""

from __future__ import annotations

from pathlib import Path

import click

from controller.analysis import AnalysisReport, resolve_trt_version
from controller.analysis import analyze as run_analysis
from controller.analysis.prediction import PredictionReport
from controller.analysis.verdict import human_bytes
from controller.cli.fetch import fetch_model_bytes
from controller.cli.render import emit_json, table
from controller.client.http import DEFAULT_URL, ApiError
from controller.errors import InvalidModel

BAR_WIDTH = 20


def _load(ref: str, url: str) -> tuple[str, bytes]:
    path = Path(ref)
    if path.is_file():
        return str(path), path.read_bytes()
    name, sep, version = ref.partition(":")
    if not sep or not name or not version or "/" in name:
        raise click.BadParameter(
            f"{ref!r} is neither an existing file nor NAME:VERSION of a pushed model",
            param_hint="REF",
        )
    try:
        return f"{name}:{version}", fetch_model_bytes(url, name, version)
    except ApiError as exc:
        raise click.ClickException(str(exc)) from exc


def _percent(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:.1f}%"


def _flops(count: int) -> str:
    for unit, scale in (("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if count >= scale:
            return f"{count / scale:.2f} {unit}"
    return f"{count} FLOP"


def render(source: str, report: AnalysisReport) -> str:
    """The report for people: verdict, histogram, partitions, crossings, what to fix."""
    rates = report.rates
    lines = [
        f"{source}  opset {report.opset}  TensorRT {report.trt_version} ONNX parser",
        report.verdict.line,
        *(f"  - {reason}" for reason in report.verdict.reasons),
        *prediction_lines(report.prediction),
        f"support: {rates.nodes_supported}/{rates.nodes_total} nodes "
        f"({_percent(rates.node_share)}), {_flops(rates.flops_supported)} of "
        f"{_flops(rates.flops_total)} ({_percent(rates.flop_share)})"
        + ("" if rates.flops_exact else " (estimate)"),
        "",
    ]
    most = max((op.count for op in report.histogram), default=1)
    lines.append(
        table(
            ["operator", "count", "on gpu", ""],
            [
                (op.op_type, op.count, op.supported, "#" * max(1, op.count * BAR_WIDTH // most))
                for op in report.histogram
            ],
        )
    )
    if report.partitions:
        lines += [
            "",
            table(
                ["partition", "nodes", "flops", "operators"],
                [
                    (
                        f"GPU#{p.number}",
                        len(p.nodes),
                        _flops(p.flops),
                        ", ".join(f"{n} {op}" for op, n in sorted(p.op_types.items())),
                    )
                    for p in report.partitions
                ],
            ),
        ]
    if report.crossings:
        lines += [
            "",
            table(
                ["crossing tensor", "from", "to", "dtype", "shape", "bytes"],
                [
                    (
                        c.tensor,
                        c.source,
                        c.target,
                        c.dtype,
                        "?"
                        if c.shape is None
                        else "x".join("?" if d is None else str(d) for d in c.shape),
                        human_bytes(c.bytes) + ("" if c.exact else " (at least)"),
                    )
                    for c in report.crossings
                ],
            ),
        ]
    if report.top_unsupported:
        lines += ["", "top unsupported operators:"]
        for u in report.top_unsupported:
            lines.append(f"  {u.op_type} x{u.count} ({_flops(u.flops)}): {u.reasons[0]}")
            lines.append(f"    fix: {u.advice}")
    nested = report.subgraph_nodes
    if nested:
        refused = [n for n in nested if not n.supported]
        lines.append(f"\nnodes in subgraphs and functions: {len(nested)}, {len(refused)} refused")
        lines += [f"  {n.path} ({n.op_type}): {n.reason}" for n in refused[:10]]
    trt = report.tensorrt
    if trt.checked:
        lines.append(
            f"\nTensorRT {trt.version} parser: {len(trt.disagreements)} disagreement(s) with the "
            "static table"
        )
        lines += [
            f"  node {d.index} {d.op_type}: table says "
            f"{'supported' if d.static_supported else 'unsupported'}, parser says "
            f"{'supported' if d.tensorrt_supported else 'unsupported'}"
            for d in trt.disagreements
        ]
    lines += [f"warning: {w}" for w in report.warnings]
    return "\n".join(lines)


def prediction_lines(prediction: PredictionReport | None) -> list[str]:
    """``tensorrt: builds`` or ``tensorrt: falls back to ONNX Runtime``, reasons and notes."""
    if prediction is None:
        return []
    return [
        prediction.line,
        *(f"  - {reason}" for reason in prediction.reasons),
        *(f"  note: {note}" for note in prediction.notes),
    ]


@click.command("analyze")
@click.argument("ref", metavar="PATH|NAME:VERSION")
@click.option(
    "--trt",
    "trt",
    type=click.Choice(["8.5", "8.6", "10.1", "auto"]),
    multiple=True,
    default=("auto",),
    show_default=True,
    help="TensorRT ONNX parser version to check against; auto = the installed one, else 10.1. "
    "Repeat it for several releases (--json then prints one report per release, by version).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON for scripts.")
@click.option(
    "--url",
    envvar="JETFLEET_URL",
    default=DEFAULT_URL,
    show_default=True,
    help="Controller URL for NAME:VERSION (env JETFLEET_URL).",
)
def analyze(ref: str, trt: tuple[str, ...], as_json: bool, url: str) -> None:
    """How much of an ONNX model (a file, or a pushed NAME:VERSION) TensorRT can take, and
    whether the agent's TensorRT build of it builds or falls back to ONNX Runtime."""
    source, data = _load(ref, url)
    versions = list(dict.fromkeys(resolve_trt_version(v) for v in trt))
    try:
        reports = {v: run_analysis(data, v) for v in versions}
    except InvalidModel as exc:
        raise click.ClickException(f"{source}: {exc}") from exc
    if as_json:
        dumped = {v: r.model_dump(mode="json") for v, r in reports.items()}
        emit_json(dumped if len(dumped) > 1 else dumped[versions[0]])
        return
    click.echo("\n\n".join(render(source, r) for r in reports.values()))
