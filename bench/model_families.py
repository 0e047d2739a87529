"""The model-family table per TensorRT release, from what ``tests/tensorrt/test_model_families.py``
recorded on the GPU test host.

That test appends one JSON line per model to ``$JETFLEET_FAMILY_RESULTS``: the release, whether
the agent served it on TensorRT (``built``) or fell back to ONNX Runtime (``fell_back``, with
TensorRT's words), the build's seconds and the analyzer's prediction. This prints, per release, a
table and the line

    model-families: tensorrt=8.6.0 models=13 built=B fell_back=F failed=0 predicted=P/13

where ``failed`` counts the models of :func:`tests.model_families.families` with no line for
that release (their test failed: the slot would serve nothing) and ``predicted`` those whose
analyzer prediction equalled the outcome. Not a timing benchmark: build seconds are what one
build took on that host (no cuDNN there), for scale only.

Usage: ``python -m bench.model_families RESULTS.jsonl... [--out bench/results]`` (writes
``tensorrt-model-families.md``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tests.model_families import RECURRENT_GATES, families, recurrent

OUTCOME = {"built": "built on TensorRT", "fell_back": "falls back to ONNX Runtime"}


HOST_SOURCES_OFF = ("CUBLAS", "CUBLAS_LT", "CUDNN")
"""What runs recorded before lines named their disabled tactic sources turned off: all three
(the GPU test host then had no cuBLAS or cuDNN)."""

RECURRENT = {op.lower(): op for op in RECURRENT_GATES}


def sources_off(line: dict[str, Any]) -> tuple[str, ...]:
    return tuple(line.get("disabled_tactic_sources", HOST_SOURCES_OFF))


def read_lines(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Every recorded line; the last line wins for a (release, model, sources off) recorded
    twice."""
    kept: dict[tuple[str, str, tuple[str, ...]], dict[str, Any]] = {}
    for path in paths:
        for raw in path.read_text(encoding="utf-8").splitlines():
            if raw.strip():
                line = json.loads(raw)
                kept.pop((line["tensorrt"], line["model"], sources_off(line)), None)
                kept[(line["tensorrt"], line["model"], sources_off(line))] = line
    return list(kept.values())


def _cell(text: str, limit: int = 160) -> str:
    """``text`` for a table cell; a long one keeps its end (TensorRT says why last)."""
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def predict_now(lines: list[dict[str, Any]]) -> None:
    """Replace each line's ``predicted`` with what this checkout's analyzer predicts for that
    release (pure, runs anywhere): the outcome is the measurement, the prediction is code."""
    from controller.analysis.report import analyze

    models = {model.name: model for model in families()}
    models.update({name: recurrent(op) for name, op in RECURRENT.items()})
    words = {"builds": "built", "falls_back": "fell_back"}
    for line in lines:
        model = models.get(line["model"])
        if model is None:
            continue
        release = ".".join(str(line["tensorrt"]).split(".")[:2])
        report = analyze(model.data, release, use_tensorrt=False, input_shapes=model.shapes)
        if report.prediction is not None:
            line["predicted"] = words[report.prediction.tensorrt]


def release_table(release: str, lines: Sequence[dict[str, Any]], names: Sequence[str]) -> str:
    """The markdown table and summary line of one release (a model's last line, where runs
    with other tactic sources off recorded it too)."""
    by_model = {line["model"]: line for line in lines if line["tensorrt"] == release}
    rows = [
        "| model | family | sources off | outcome | build s | analyzer predicted "
        "| TensorRT's words |",
        "|---|---|---|---|---|---|---|",
    ]
    built = fell_back = failed = predicted = 0
    for name in names:
        line = by_model.get(name)
        if line is None:
            failed += 1
            rows.append(f"| {name} | | | **failed: serves nothing** | | | |")
            continue
        built += line["outcome"] == "built"
        fell_back += line["outcome"] == "fell_back"
        guess = line.get("predicted")
        predicted += guess == line["outcome"]
        seconds = "" if line.get("build_seconds") is None else f"{line['build_seconds']:.1f}"
        rows.append(
            f"| {name} | {_cell(line['family'], 60)} | {_off(line)} "
            f"| {OUTCOME[line['outcome']]} | {seconds} "
            f"| {OUTCOME.get(str(guess), str(guess or ''))} | {_cell(line.get('reason', ''))} |"
        )
    summary = (
        f"model-families: tensorrt={release} models={len(names)} built={built} "
        f"fell_back={fell_back} failed={failed} predicted={predicted}/{len(names)}"
    )
    return "\n".join([f"## TensorRT {release}", "", *rows, "", f"`{summary}`", ""])


def _off(line: dict[str, Any]) -> str:
    return ", ".join(sources_off(line)) or "none"


def tactic_table(release: str, lines: Sequence[dict[str, Any]]) -> str:
    """Each recurrent operator under each set of disabled tactic sources the run tried, with
    the analyzer's prediction (which no tactic source changes); empty when the run tried
    none."""
    mine = [ln for ln in lines if ln["tensorrt"] == release and ln["model"] in RECURRENT]
    if not mine:
        return ""
    mine.sort(key=lambda ln: (ln["model"], len(sources_off(ln)), sources_off(ln)))
    rows = [
        "| operator | sources off | outcome | analyzer predicted | TensorRT's words |",
        "|---|---|---|---|---|",
    ]
    right = 0
    for line in mine:
        guess = line.get("predicted")
        right += guess == line["outcome"]
        rows.append(
            f"| {RECURRENT[line['model']]} | {_off(line)} | {OUTCOME[line['outcome']]} "
            f"| {OUTCOME.get(str(guess), str(guess or ''))} | {_cell(line.get('reason', ''))} |"
        )
    summary = f"tactic-sources: tensorrt={release} builds={len(mine)} predicted={right}/{len(mine)}"
    title = f"### TensorRT {release}: recurrent operators by disabled tactic sources"
    return "\n".join([title, "", *rows, "", f"`{summary}`", ""])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--note", default="", help="what the runs were (commit, host, date)")
    parser.add_argument(
        "--as-recorded",
        action="store_true",
        help="keep the predictions recorded in the runs instead of this checkout's analyzer's",
    )
    args = parser.parse_args(argv)
    lines = read_lines(args.results)
    if not args.as_recorded:
        predict_now(lines)
    names = [model.name for model in families()]
    releases = sorted({line["tensorrt"] for line in lines})
    text = "\n".join(
        [
            "# Model families on real TensorRT (tests/tensorrt/test_model_families.py)",
            "",
            "Written by `python -m bench.model_families`; see its docstring. Outcomes are what the"
            " runs measured; `analyzer predicted` is this checkout's analyzer unless the file says"
            " `--as-recorded`.",
            "",
            *([args.note, ""] if args.note else []),
            *[
                part
                for release in releases
                for part in (release_table(release, lines, names), tactic_table(release, lines))
                if part
            ],
        ]
    )
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tensorrt-model-families.md").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
