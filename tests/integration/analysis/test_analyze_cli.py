"""``analyze`` through click as an operator runs it: on a file, and on a pushed NAME:VERSION."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from controller.cli.analyze import analyze
from controller.server import Controller
from controller.settings import Settings
from tests.analysis_models import mobilenet_v2_like
from tests.integration.controller.conftest import admin_token, new_token, start_controller


def run(*args: str) -> Result:
    return CliRunner().invoke(analyze, list(args))


@pytest.fixture
def mobilenet(tmp_path: Path) -> Path:
    path = tmp_path / "mobilenet_v2.onnx"
    path.write_bytes(mobilenet_v2_like())
    return path


@pytest.fixture
def mobilenet_with_custom_op(tmp_path: Path) -> Path:
    path = tmp_path / "mobilenet_v2_custom.onnx"
    path.write_bytes(mobilenet_v2_like(custom_after_block=3))
    return path


def test_a_mobilenet_v2_file_fully_delegates(mobilenet: Path) -> None:
    result = run(str(mobilenet), "--trt", "10.1")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"{mobilenet}  opset 17  TensorRT 10.1")
    assert lines[1] == "full delegation: 1 partition, 100.0% of FLOPs on GPU"
    histogram = {line.split()[0]: line.split()[1:3] for line in lines if line[:1].isupper()}
    assert histogram["Conv"] == ["40", "40"]
    assert histogram["Clip"] == ["27", "27"]
    assert histogram["Add"] == ["8", "8"]
    assert "CROSSING TENSOR" not in result.output
    assert "top unsupported" not in result.output


def test_a_custom_op_mid_network_gives_two_engines_crossings_and_advice(
    mobilenet_with_custom_op: Path,
) -> None:
    result = run(str(mobilenet_with_custom_op), "--trt", "10.1")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "partial delegation: 2 partitions, 100.0% of FLOPs on GPU, 2 crossings, 196.0 KiB" in out
    crossing_rows = [line.split() for line in out.splitlines() if line.startswith("b3_")]
    assert crossing_rows == [
        ["b3_proj_bn", "GPU#2", "CPU", "FP32", "1x32x28x28", "98.0", "KiB"],
        ["b3_custom", "CPU", "GPU#1", "FP32", "1x32x28x28", "98.0", "KiB"],
    ]
    assert "com.example::FancyOp x1" in out
    assert "fix: replace it with standard ONNX ops or write a TensorRT plugin" in out


def test_json_is_the_full_report(mobilenet_with_custom_op: Path) -> None:
    result = run(str(mobilenet_with_custom_op), "--trt", "8.5", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["trt_version"] == "8.5"
    assert report["verdict"]["kind"] == "partial"
    assert report["verdict"]["crossing_bytes"] == 2 * 32 * 28 * 28 * 4
    assert [p["number"] for p in report["partitions"]] == [1, 2]
    assert sum(len(p["nodes"]) for p in report["partitions"]) == report["rates"]["nodes_supported"]
    assert report["rates"]["flops_total"] > 400_000_000


def test_a_missing_file_or_bad_model_fails_in_one_line(tmp_path: Path) -> None:
    missing = run(str(tmp_path / "nope.onnx"))
    assert missing.exit_code == 2
    assert "neither an existing file nor NAME:VERSION" in missing.output
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not onnx at all")
    broken = run(str(bad))
    assert broken.exit_code == 1
    assert broken.output.startswith(f"Error: {bad}: not a valid ONNX model")
    assert len(broken.output.strip().splitlines()) == 1


@pytest.fixture
def controller(mosquitto: str, sqlite_url: str, tmp_path: Path) -> Iterator[Controller]:
    settings = Settings(
        db_url=sqlite_url,
        broker_url=mosquitto,
        data_dir=tmp_path / "data",
        http_port=0,
        topic_prefix=f"jftest/analyze-{tmp_path.name[-8:]}",
        auto_migrate=True,
    )
    c = start_controller(settings)
    yield c
    c.stop()


def test_a_pushed_model_version_is_downloaded_and_analysed(
    controller: Controller, mobilenet_with_custom_op: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from controller.client.http import ControllerClient

    monkeypatch.setenv("JETFLEET_TOKEN", new_token(controller, "analyst", "viewer"))
    with ControllerClient(controller.http_url, token=admin_token(controller)) as client:
        client.push_model(mobilenet_with_custom_op, "mnv2", "1.0")
    result = run("mnv2:1.0", "--trt", "10.1", "--url", controller.http_url)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("mnv2:1.0  opset 17  TensorRT 10.1")
    assert "partial delegation: 2 partitions" in result.output

    missing = run("mnv2:9.9", "--url", controller.http_url)
    assert missing.exit_code == 1
    assert "(HTTP 404)" in missing.output
    assert isinstance(missing.exception, SystemExit)
