"""The operator CLI against a real controller over HTTP: what an operator types and sees."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from controller.cli.main import cli
from controller.demo.sample_models import classifier
from controller.server import Controller
from shared.codec import encode
from shared.topics import Channel, Topics
from tests.analysis_models import mobilenet_v2_like
from tests.integration.controller.agent_messages import reported, telemetry
from tests.integration.controller.conftest import MqttPeer, api_client, poll
from tests.ports import free_port


def one_line_error(result: Result) -> str:
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return lines[0]


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "classifier.onnx"
    path.write_bytes(classifier())
    return path


def test_push_list_and_show_a_model(run: Callable[..., Result], model_file: Path) -> None:
    pushed = run("models", "push", str(model_file), "--name", "classifier", "--version", "1.0")
    assert pushed.exit_code == 0, pushed.output
    assert pushed.output.startswith("pushed classifier:1.0 sha256=")

    listed = json.loads(run("models", "ls", "--json").output)
    assert [(v["name"], v["version"]) for m in listed for v in m["versions"]] == [
        ("classifier", "1.0")
    ]
    table = run("models", "ls").output.splitlines()
    assert table[0].split() == ["MODEL", "VERSION", "SHA256", "BYTES", "CREATED"]
    assert table[1].split()[:2] == ["classifier", "1.0"]

    shown = run("models", "show", "classifier:1.0").output
    assert "input    image FP32 [1, 3, 32, 32]" in shown
    assert "output   probabilities FP32 [1, 10]" in shown
    assert "trt 10.1 full delegation: 1 partition, 100.0% of FLOPs on GPU" in shown
    assert "tensorrt: builds" in shown  # the agent's whole-model build, predicted


def test_push_stores_the_static_analysis_per_tensorrt_version(
    run: Callable[..., Result], controller: Controller, tmp_path: Path
) -> None:
    path = tmp_path / "mnv2.onnx"
    path.write_bytes(mobilenet_v2_like(size=96, classes=10, custom_after_block=3))
    pushed = run("models", "push", str(path), "--name", "mnv2", "--version", "1", "--json")
    delegation = json.loads(pushed.output)["delegation"]
    assert sorted(delegation) == ["10.1", "8.5", "8.6"]
    assert delegation["10.1"]["verdict"] == "partial"
    assert delegation["10.1"]["flop_share"] == 1.0  # the custom op itself costs no FLOPs
    assert delegation["10.1"]["node_share"] < 1
    assert delegation["10.1"]["tensorrt"] == "falls_back"  # a custom op the parser lacks
    assert delegation["10.1"]["tensorrt_reason"]
    shown = run("models", "show", "mnv2:1").output
    assert "tensorrt: falls back to ONNX Runtime: " in shown

    with api_client(controller) as http:
        report = http.get("/api/v1/models/mnv2/versions/1/analysis", params={"trt": "10.1"})
        assert report.status_code == 200
        assert len(report.json()["partitions"]) == 2
        missing = http.get("/api/v1/models/mnv2/versions/1/analysis", params={"trt": "7.0"})
        assert missing.status_code == 404


def test_push_an_artifact_and_name_it_in_a_config(
    run: Callable[..., Result], tmp_path: Path
) -> None:
    cache = tmp_path / "calib.cache"
    cache.write_bytes(b"TRT-8600-EntropyCalibration2\n")
    pushed = run("artifacts", "push", str(cache))
    assert pushed.exit_code == 0, pushed.output
    sha = pushed.output.split()[0].removeprefix("sha256=")
    assert sha == hashlib.sha256(cache.read_bytes()).hexdigest()
    layer = run(
        "configs", "set", "int8", "--precision", "int8", "--set", f"calibration_cache_sha256={sha}"
    )
    assert layer.exit_code == 0, layer.output


def test_pushing_a_file_that_is_not_onnx_fails_in_one_line(
    run: Callable[..., Result], tmp_path: Path
) -> None:
    bad = tmp_path / "notes.onnx"
    bad.write_bytes(b"this is not a model")
    line = one_line_error(run("models", "push", str(bad), "--name", "x", "--version", "1"))
    assert "ONNX" in line
    assert "(HTTP 400)" in line
    assert json.loads(run("models", "ls", "--json").output) == []


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("models", "show", "nosuch:1"), "nosuch"),
        (("devices", "show", "gw-missing"), "gw-missing"),
        (("deploy", "nosuch:1", "--device", "gw-missing"), "(HTTP 404)"),
        (("undeploy", "classifier", "--device", "gw-missing"), "gw-missing"),
        (("telemetry", "gw-missing"), "gw-missing"),
    ],
)
def test_unknown_devices_and_models_are_one_line_errors(
    run: Callable[..., Result], args: tuple[str, ...], needle: str
) -> None:
    assert needle in one_line_error(run(*args))


def test_deploy_needs_exactly_one_target(run: Callable[..., Result]) -> None:
    result = run("deploy", "classifier:1")
    assert result.exit_code == 2
    assert "exactly one of --device ID or --selector k=v" in result.output


def test_unreachable_controller_is_one_line_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    line = one_line_error(CliRunner().invoke(cli, ["devices", "ls", "--url", url]))
    assert line.startswith(f"Error: cannot reach the controller at {url}")


def test_deploy_then_see_device_slots_and_telemetry(
    run: Callable[..., Result],
    controller: Controller,
    peers: Callable[[str], MqttPeer],
    prefix: str,
    model_file: Path,
) -> None:
    topics = Topics(prefix)
    agent = peers(controller.broker_url)
    agent.publish(topics.device("gw-7", Channel.REPORTED), encode(reported("gw-7", {"site": "a"})))
    poll(lambda: "gw-7" in run("devices", "ls").output, what="gw-7 listed")
    assert run("devices", "label", "gw-7", "site=a").output.strip() == "gw-7: labels site=a"
    run("models", "push", str(model_file), "--name", "classifier", "--version", "2")

    deployed = run("deploy", "classifier:2", "--selector", "site=a")
    assert deployed.output.strip() == "gw-7: deployed (generation 1)"
    again = run("deploy", "classifier:2", "--device", "gw-7", "--json")
    assert json.loads(again.output)["devices"] == [
        {"device_id": "gw-7", "generation": 1, "changed": False}
    ]
    device = json.loads(run("devices", "show", "gw-7", "--json").output)
    assert [(s["name"], s["version"]) for s in device["desired"]] == [("classifier", "2")]

    agent.publish(topics.device("gw-7", Channel.TELEMETRY), encode(telemetry("gw-7", "s-1", 42.0)))
    poll(lambda: "42%" in run("telemetry", "gw-7").output, what="telemetry shown")

    removed = run("undeploy", "classifier", "--device", "gw-7")
    assert removed.output.strip() == "gw-7: removed (generation 2)"


def test_rollout_to_a_device_that_cannot_build_warns_and_strict_refuses(
    run: Callable[..., Result],
    controller: Controller,
    peers: Callable[[str], MqttPeer],
    prefix: str,
    tmp_path: Path,
) -> None:
    topics = Topics(prefix)
    agent = peers(controller.broker_url)
    state = reported("gw-trt", {"site": "t"})
    facts = state.facts.model_copy(update={"tensorrt_version": "10.3.0.30"})
    state = state.model_copy(update={"facts": facts})
    agent.publish(topics.device("gw-trt", Channel.REPORTED), encode(state))
    poll(lambda: "gw-trt" in run("devices", "ls").output, what="gw-trt listed")
    path = tmp_path / "custom.onnx"
    path.write_bytes(mobilenet_v2_like(size=64, classes=4, custom_after_block=1))
    run("models", "push", str(path), "--name", "custom", "--version", "1")

    strict = run("rollouts", "create", "--model", "custom:1", "--device", "gw-trt", "--strict")
    line = one_line_error(strict)
    assert "refused (strict): gw-trt: TensorRT 10.3.0.30 cannot run all of custom:1" in line

    created = run("rollouts", "create", "--model", "custom:1", "--device", "gw-trt", "--json")
    assert created.exit_code == 0, created.output
    warnings = json.loads(created.output)["warnings"]
    assert len(warnings) == 1
    assert warnings[0].startswith("gw-trt: TensorRT 10.3.0.30")


def test_a_model_with_external_data_pushes_as_its_folder_and_a_bare_onnx_says_so(
    run: Callable[..., Result], tmp_path: Path
) -> None:
    """The folder of a .onnx whose weights are in files beside it is pushed as
    one model (the controller inlines the data; served answers are checked in test_model_corpus);
    the .onnx alone is refused in one line naming what to push instead."""
    import onnx

    inline = onnx.load_model_from_string(classifier(seed=3))
    export = tmp_path / "export"
    (export / "weights").mkdir(parents=True)
    onnx.save_model(
        inline,
        str(export / "model.onnx"),
        save_as_external_data=True,
        location="weights/all.bin",
        size_threshold=0,
    )
    bare = one_line_error(
        run("models", "push", str(export / "model.onnx"), "--name", "big", "--version", "1")
    )
    assert "weights/all.bin" in bare
    assert "archive" in bare
    pushed = run("models", "push", str(export), "--name", "big", "--version", "1", "--json")
    assert pushed.exit_code == 0, pushed.output
    stored = json.loads(pushed.output)
    assert [i["name"] for i in stored["inputs"]] == ["image"]
    again = run("models", "push", str(export), "--name", "big", "--version", "1", "--json")
    assert again.exit_code == 0, again.output  # the same folder again: the same model
    assert json.loads(again.output)["sha256"] == stored["sha256"]
    (export / "link.bin").symlink_to("/etc/passwd")
    linked = one_line_error(run("models", "push", str(export), "--name", "big", "--version", "2"))
    assert "symbolic link" in linked
