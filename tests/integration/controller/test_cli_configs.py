"""The operator CLI for configs, engines and the device view, against a real controller."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

import httpx
from click.testing import Result

from controller.cli.configs import parse_set, parse_shape
from controller.demo.sample_models import classifier
from controller.server import Controller
from shared.codec import encode
from shared.messages import SlotPhase, SlotStatus
from shared.topics import Channel, Topics
from tests.integration.controller.agent_messages import now
from tests.integration.controller.conftest import MqttPeer, poll
from tests.integration.controller.test_configs import ORIN, jetson_reported
from tests.integration.controller.test_engine_store import ENGINE_BYTES, manifest


def test_shape_and_set_options_parse() -> None:
    assert parse_shape("image:1x3x32x32:4x3x32x32:8x3x32x32") == {
        "input": "image",
        "min": [1, 3, 32, 32],
        "opt": [4, 3, 32, 32],
        "max": [8, 3, 32, 32],
    }
    assert parse_set(
        ("timing_cache=false", "power_mode=15W", "onnxruntime.trt_max_partitions=2")
    ) == {
        "timing_cache": False,
        "power_mode": "15W",
        "onnxruntime": {"trt_max_partitions": 2},
    }


def test_configs_set_show_resolve_and_deploy_then_see_the_device(
    run: Callable[..., Result],
    controller: Controller,
    api: httpx.Client,
    peers: Callable[[str], MqttPeer],
    prefix: str,
) -> None:
    topics = Topics(prefix)
    agent = peers(controller.broker_url)
    agent.publish(
        topics.device("gw-1", Channel.REPORTED),
        encode(jetson_reported("gw-1", {"site": "a"}, dla_cores=2)),
    )
    poll(lambda: "gw-1" in run("devices", "ls").output, what="gw-1 listed")
    api.put("/api/v1/models/classifier/versions/1", content=classifier())

    first = run("configs", "set", "edge", "--precision", "fp16", "--streams", "2")
    assert first.exit_code == 0, first.output
    assert first.output.startswith('config edge: default = {"precision": "fp16", "streams": 2}')
    merged = run("configs", "set", "edge", "--default", "--jetson-clocks", "--power-mode", "15W")
    assert merged.exit_code == 0, merged.output
    cls = run(
        "configs",
        "set",
        "edge",
        "--class",
        ORIN,
        "--dla-core",
        "1",
        "--providers",
        "CUDAExecutionProvider,CPUExecutionProvider",
    )
    assert cls.exit_code == 0, cls.output
    dev = run(
        "configs",
        "set",
        "edge",
        "--device",
        "gw-1",
        "--shape",
        "image:1x3x32x32:1x3x32x32:1x3x32x32",
        "--set",
        "timing_cache=false",
    )
    assert dev.exit_code == 0, dev.output

    listed = run("configs", "ls").output.splitlines()
    assert listed[0].split() == ["CONFIG", "LAYERS", "SCOPES"]
    assert listed[1].split() == ["edge", "3", "default", f"class={ORIN}", "device=gw-1"]
    shown = run("configs", "show", "edge").output
    rows_shown = [line.split() for line in shown.splitlines()[2:]]
    assert ["default", "precision", '"fp16"'] in rows_shown
    assert ["device=gw-1", "timing_cache", "false"] in rows_shown
    layers = json.loads(run("configs", "show", "edge", "--json").output)["layers"]
    assert layers[0]["values"] == {
        "precision": "fp16",
        "streams": 2,
        "jetson_clocks": True,
        "power_mode": "15W",
    }

    resolved = run("configs", "resolve", "gw-1", "--model", "classifier:1", "--config", "edge")
    assert resolved.exit_code == 0, resolved.output
    rows = {line.split()[0]: line.split()[1:] for line in resolved.output.splitlines()[2:]}
    assert rows["precision"] == ['"fp16"', "default"]
    assert rows["dla_core"] == ["1", f"class={ORIN}"]
    assert rows["timing_cache"] == ["false", "device=gw-1"]
    assert rows["onnxruntime.providers"][-1] == f"class={ORIN}"
    assert rows["gpu_fallback"] == ["true", "default"]
    assert "problem:" not in resolved.output

    deployed = run("deploy", "classifier:1", "--device", "gw-1", "--config", "edge")
    assert deployed.output.strip() == "gw-1: deployed (generation 1)"
    slot_source = run("configs", "resolve", "gw-1", "--model", "classifier", "--json")
    assert json.loads(slot_source.output)["config"] == "edge"

    agent.publish(
        topics.device("gw-1", Channel.REPORTED),
        encode(
            jetson_reported("gw-1", {"site": "a"}, dla_cores=2).model_copy(
                update={
                    "observed_generation": 1,
                    "slots": (
                        SlotStatus(
                            name="classifier",
                            desired_version="1",
                            active_version="1",
                            phase=SlotPhase.SERVING,
                            engine_key="f" * 64,
                            runtime="tensorrt",
                            engine_source="pulled",
                            tuning_tag="25W",
                            tuning_matches=False,
                            updated_at=now(),
                        ),
                    ),
                }
            )
        ),
    )
    poll(lambda: "serving" in run("devices", "show", "gw-1").output, what="slot reported")
    shown = run("devices", "show", "gw-1").output
    assert f"class     {ORIN}" in shown
    header = next(line for line in shown.splitlines() if line.startswith("MODEL"))
    assert header.split() == [
        "MODEL",
        "DESIRED",
        "ACTIVE",
        "PHASE",
        "CONFIG",
        "RUNTIME",
        "ENGINE",
        "TUNING",
        "SOURCE",
        "ERROR",
    ]
    row = next(line for line in shown.splitlines() if line.startswith("classifier"))
    assert row.split() == [
        "classifier",
        "1",
        "1",
        "serving",
        "edge",
        "tensorrt",
        "f" * 12,
        "25W",
        "(mismatch)",
        "pulled",
        "-",
    ]

    # a build bound and what happens past it, for a config of their own
    bounded = run("configs", "set", "bounded", "--build-timeout", "1800", "--fallback", "none")
    assert bounded.exit_code == 0, bounded.output
    assert '"build_timeout_s": 1800.0' in bounded.output
    assert '"fallback": "none"' in bounded.output


def test_configs_errors_are_one_line(run: Callable[..., Result]) -> None:
    bad = run("configs", "set", "edge", "--set", 'precison="fp16"')
    assert bad.exit_code == 1
    assert "precison" in bad.output
    assert "(HTTP 400)" in bad.output
    assert run("configs", "set", "edge").exit_code == 2
    both = run("configs", "set", "edge", "--default", "--device", "gw-1", "--streams", "2")
    assert both.exit_code == 2
    assert "at most one of" in both.output
    missing = run("configs", "show", "nosuch")
    assert missing.exit_code == 1
    assert "unknown config 'nosuch'" in missing.output


def test_engines_ls(run: Callable[..., Result], api: httpx.Client) -> None:
    m = manifest(ENGINE_BYTES)
    api.post("/api/v1/artifacts", content=ENGINE_BYTES)
    assert (
        api.put(f"/api/v1/engines/{m.engine_key}", json=m.model_dump(mode="json")).status_code
        == 201
    )
    lines = run("engines", "ls").output.splitlines()
    assert lines[0].split() == [
        "ENGINE",
        "BUILT",
        "BY",
        "CLASS",
        "TUNING",
        "TWINS",
        "BYTES",
        "SECONDS",
    ]
    assert lines[1].split() == [
        m.engine_key[:12],
        "tests-admin",
        "(operator)",
        "p3767-0005",
        "(sm",
        "8.7)",
        "15W+clocks",
        "operator",
        str(len(ENGINE_BYTES)),
        "42.5",
    ]
    assert (
        json.loads(run("engines", "ls", "--json").output)[0]["sha256"]
        == hashlib.sha256(ENGINE_BYTES).hexdigest()
    )
