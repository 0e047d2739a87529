"""A TensorRT build that failed for reasons of the model is remembered per engine key
in the engine store, so twins serve the version on ONNX Runtime at once instead of repeating a
build that takes minutes to hours on a Jetson and fails the same way.

A real controller (auth on, SQLite) and Mosquitto; device gw-a reports its facts over MQTT and
its failed build over HTTP with its device token, as its agent does; device gw-b is a real agent
daemon with runtime ``tensorrt`` and the same hardware, asking the same store. What gw-b's slot
does with the remembered failure is what the issue asks: no TensorRT build, the reason named."""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from pydantic import SecretStr

from agent.engines.identity import identify
from agent.hardware.facts import probe_facts
from controller.cli.main import cli
from controller.demo.sample_models import classifier
from controller.server import Controller
from shared.delegate import DelegateConfig
from shared.engines import BuildFailure
from shared.facts import DeviceFacts
from shared.messages import Event, ReportedState, SlotPhase
from shared.topics import Topics
from tests.integration.agent.artifact_server import ArtifactServer
from tests.integration.agent.test_agent_mqtt import DEVICE, Observer, desired, infer, settings_for
from tests.integration.agent.test_agent_mqtt import _clean_env as _clean_env
from tests.integration.agent.test_agent_mqtt import observer as observer
from tests.integration.agent.test_agent_mqtt import topics as topics
from tests.integration.agent.test_tensorrt_fallback import tensorrt_agent, tensorrt_facts
from tests.integration.controller.conftest import admin_token, bearer, new_token
from tests.integration.controller.device_reports import report_facts

PARSER = (
    "In node 7 (parseGraph): INVALID_NODE: IIfConditionalOutputLayer inputs must have the "
    "same shape"
)


def rtx(hostname: str) -> DeviceFacts:
    return tensorrt_facts(hostname)


@pytest.fixture
def remembered_failure(controller: Controller, api: httpx.Client, tmp_path: Path) -> str:
    """gw-a reported its facts and then the failed build of the classifier: the engine key."""
    report_facts(controller, api, "gw-a", rtx("gw-a"))
    sha = hashlib.sha256(classifier(seed=1)).hexdigest()
    identity = identify("tensorrt", rtx("gw-a"), sha, DelegateConfig())
    report = BuildFailure(
        device_id="gw-a", validity=identity.validity, content=identity.content, reason=PARSER
    )
    token = new_token(controller, "gw-a", "device", device_id="gw-a")
    with httpx.Client(base_url=controller.http_url, headers=bearer(token), timeout=10) as device:
        stored = device.put(
            f"/api/v1/engines/{identity.key}/failure", json=report.model_dump(mode="json")
        )
    assert stored.status_code == 200, stored.text
    return identity.key


def test_a_device_reports_only_for_its_own_validity(
    controller: Controller, api: httpx.Client
) -> None:
    report_facts(controller, api, "gw-cpu", probe_facts().model_copy(update={"hostname": "gw-cpu"}))
    identity = identify("tensorrt", rtx("gw-a"), "b" * 64, DelegateConfig())
    report = BuildFailure(
        device_id="gw-cpu", validity=identity.validity, content=identity.content, reason=PARSER
    )
    token = new_token(controller, "gw-cpu", "device", device_id="gw-cpu")
    with httpx.Client(base_url=controller.http_url, headers=bearer(token), timeout=10) as device:
        refused = device.put(
            f"/api/v1/engines/{identity.key}/failure", json=report.model_dump(mode="json")
        )
    assert refused.status_code == 403, refused.text
    assert api.get(f"/api/v1/engines/{identity.key}/failure").status_code == 404


def test_a_twin_serves_on_onnxruntime_without_building_a_remembered_failure(
    controller: Controller,
    api: httpx.Client,
    remembered_failure: str,
    mosquitto: str,
    topics: Topics,
    observer: Observer,
    artifact_server: ArtifactServer,
    tmp_path: Path,
) -> None:
    key = remembered_failure
    shown = api.get(f"/api/v1/engines/{key}/failure").json()
    assert (shown["device_id"], shown["reason"]) == ("gw-a", PARSER)

    token = new_token(controller, DEVICE, "device", device_id=DEVICE)
    settings = settings_for(mosquitto, topics, tmp_path / "gw-b").model_copy(
        update={"controller_url": controller.http_url, "api_token": SecretStr(token)}
    )
    v1 = artifact_server.add("v1.onnx", classifier(seed=1))
    twin = tensorrt_agent(settings, rtx(DEVICE))
    try:
        observer.publish_desired(desired(1, "1", v1))
        reported = observer.wait_for(
            ReportedState,
            lambda r: any(s.phase is SlotPhase.SERVING for s in r.slots),
            "the twin serving",
            60,
        )
        slot = reported.slots[0]
        assert slot.runtime == "onnxruntime"
        assert slot.fallback_reason is not None
        assert f"TensorRT could not build engine {key[:12]} on gw-a" in slot.fallback_reason
        assert PARSER in slot.fallback_reason
        assert reported.serve_url is not None
        assert infer(reported.serve_url)["model_version"] == "1"
        trt_builds = [
            m
            for m in observer.messages
            if isinstance(m, Event)
            and m.kind == "build_started"
            and m.data["runtime"] == "tensorrt"
        ]
        assert trt_builds == [], "the twin built what is known to fail"
    finally:
        twin.stop()

    runner = CliRunner(env={"JETFLEET_TOKEN": admin_token(controller, "alice")})
    forgot = runner.invoke(cli, ["engines", "forget-failure", key, "--url", controller.http_url])
    assert forgot.exit_code == 0, forgot.output
    assert "reported by gw-a" in forgot.output
    assert api.get(f"/api/v1/engines/{key}/failure").status_code == 404
