"""A delegate config's disabled tactic sources change the prediction where the builder needs them.

What real TensorRT did (``tests/tensorrt/test_model_families.py`` builds each recurrent operator
with each set of disabled sources; ``bench/results/tensorrt-h200.md``): 8.5.2 with the cuBLAS
sources off cannot build LSTM/GRU/RNN ("Could not find any implementation for node
{ForeignNode[...LoopOutput]}"), 8.6.0 builds them without cuBLAS.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from controller.analysis.report import analyze
from controller.cli.analyze import analyze as analyze_command
from tests.model_families import RECURRENT_GATES, classic_cnn, lstm_gru, recurrent

NO_CUBLAS = ("CUBLAS", "CUBLAS_LT")
LOOP_WORDS = "Could not find any implementation for node {ForeignNode[...LoopOutput]}"


@pytest.mark.parametrize("op", sorted(RECURRENT_GATES))
def test_a_recurrent_op_falls_back_on_8_5_with_both_cublas_sources_off(op: str) -> None:
    model = recurrent(op)
    off = analyze(model.data, "8.5", use_tensorrt=False, disabled_tactic_sources=NO_CUBLAS)
    assert off.prediction is not None
    assert off.prediction.tensorrt == "falls_back"
    assert off.prediction.refused == 1
    (reason,) = off.prediction.reasons
    assert reason.startswith(f"{op}_0: {op} needs a CUBLAS/CUBLAS_LT tactic on TensorRT 8.5")
    assert LOOP_WORDS in reason
    assert off.verdict.kind == "full"  # the parser takes it: the verdict is not the build's


@pytest.mark.parametrize(
    ("version", "disabled"),
    [
        ("8.5", ()),
        ("8.5", ("CUDNN",)),
        ("8.5", ("CUBLAS",)),  # cuBLASLt still there
        ("8.5", ("CUBLAS_LT", "CUDNN")),  # cuBLAS still there
        ("8.6", (*NO_CUBLAS, "CUDNN")),  # 8.6.0 builds the loop without cuBLAS
        ("10.1", NO_CUBLAS),
    ],
)
def test_a_recurrent_model_builds_where_a_cublas_source_is_left_or_the_release_needs_none(
    version: str, disabled: tuple[str, ...]
) -> None:
    report = analyze(lstm_gru().data, version, use_tensorrt=False, disabled_tactic_sources=disabled)
    assert report.prediction is not None
    assert report.prediction.tensorrt == "builds", report.prediction.reasons


def test_a_model_without_recurrent_ops_is_not_touched_by_the_tactic_sources() -> None:
    data = classic_cnn().data
    report = analyze(data, "8.5", use_tensorrt=False, disabled_tactic_sources=NO_CUBLAS)
    assert report.prediction is not None
    assert report.prediction.tensorrt == "builds"


def test_the_cli_takes_the_config_s_disabled_tactic_sources(tmp_path: Path) -> None:
    path = tmp_path / "lstm_gru.onnx"
    path.write_bytes(lstm_gru().data)
    runner = CliRunner()

    plain = runner.invoke(analyze_command, [str(path), "--trt", "8.5"])
    assert plain.exit_code == 0, plain.output
    assert "tensorrt: builds" in plain.output.splitlines()

    args = [str(path), "--trt", "8.5", "--disable-tactic-source", "CUBLAS"]
    off = runner.invoke(analyze_command, [*args, "--disable-tactic-source", "CUBLAS_LT"])
    assert off.exit_code == 0, off.output
    lines = off.output.splitlines()
    at = lines.index("tensorrt: falls back to ONNX Runtime")
    assert lines[at + 1].startswith("  - LSTM_0: LSTM needs a CUBLAS/CUBLAS_LT tactic")
    assert lines[at + 2].startswith("  - GRU_")

    as_json = runner.invoke(
        analyze_command, [*args, "--disable-tactic-source", "CUBLAS_LT", "--json"]
    )
    assert json.loads(as_json.output)["prediction"]["refused"] == 2

    typo = runner.invoke(analyze_command, [*args[:3], "--disable-tactic-source", "CUBLASLT"])
    assert typo.exit_code == 2
    assert "'CUBLASLT' is not one of" in typo.output
