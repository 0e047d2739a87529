"""Every model serves. A slot that TensorRT cannot serve is served by ONNX Runtime on
the same device and says why; ``fallback: none`` fails it as before; after a restart it serves
again from the journal without building TensorRT again.

The agent here runs its real TensorRT runtime (runtime ``tensorrt``, a device whose facts name
TensorRT 10.3 and an RTX GPU). This machine has no TensorRT, so the agent's real TensorRT build
path fails the way it does on a gateway without a usable TensorRT: the build is refused because
no interpreter imports ``tensorrt`` (agent/engines/trt_interpreter.py). What the slot does with
that failure is what it does with a parser refusal on a Jetson; the decision per kind of failure
is unit-tested in tests/unit/agent/slots/test_fallback.py. Real Mosquitto, real HTTP, real ONNX
Runtime."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from agent.hardware.facts import probe_facts
from agent.settings import AgentSettings
from controller.demo.sample_models import classifier
from shared.delegate import DelegateConfig
from shared.facts import DeviceFacts, GpuFacts
from shared.messages import DesiredState, Event, ReportedState, SlotPhase
from shared.topics import Topics
from tests.agent_runner import RunningAgent
from tests.integration.agent.artifact_server import ArtifactServer
from tests.integration.agent.test_agent_mqtt import (
    Observer,
    desired,
    infer,
    settings_for,
)
from tests.integration.agent.test_agent_mqtt import _clean_env as _clean_env
from tests.integration.agent.test_agent_mqtt import observer as observer
from tests.integration.agent.test_agent_mqtt import topics as topics


def tensorrt_facts(hostname: str | None = None) -> DeviceFacts:
    """This machine's facts, as a device with TensorRT 10.3 and an RTX A2000 reports them."""
    update: dict[str, object] = {
        "tensorrt_version": "10.3.0",
        "gpu": GpuFacts(name="NVIDIA RTX A2000", compute_capability="8.6"),
    }
    if hostname is not None:
        update["hostname"] = hostname
    return probe_facts().model_copy(update=update)


def tensorrt_agent(settings: AgentSettings, facts: DeviceFacts | None = None) -> RunningAgent:
    """The agent daemon with runtime ``tensorrt`` on a thread (``stop`` stops it)."""
    return RunningAgent(settings, facts or tensorrt_facts(), runtime="tensorrt")


@pytest.fixture
def no_tensorrt_python(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No interpreter here imports tensorrt (say so even where one would)."""
    monkeypatch.setenv("JETFLEET_TENSORRT_PYTHON", str(tmp_path / "no-such-python"))


def with_config(state: DesiredState, config: DelegateConfig) -> DesiredState:
    slot = state.slots[0]
    return state.model_copy(update={"slots": (slot.model_copy(update={"delegate": config}),)})


def serving(r: ReportedState) -> bool:
    return any(s.phase is SlotPhase.SERVING for s in r.slots)


@pytest.mark.usefixtures("no_tensorrt_python")
def test_a_version_tensorrt_cannot_build_serves_on_onnxruntime_and_says_why(
    mosquitto: str,
    topics: Topics,
    observer: Observer,
    artifact_server: ArtifactServer,
    tmp_path: Path,
) -> None:
    v1 = artifact_server.add("v1.onnx", classifier(seed=1))
    agent = tensorrt_agent(settings_for(mosquitto, topics, tmp_path))
    try:
        observer.publish_desired(desired(1, "1", v1))
        reported = observer.wait_for(ReportedState, serving, "classifier 1 serving", 60)
        slot = reported.slots[0]
        assert (slot.runtime, slot.active_version) == ("onnxruntime", "1")
        assert slot.fallback_reason is not None
        assert slot.fallback_reason.startswith("TensorRT build refused")
        assert "tensorrt" in slot.fallback_reason.lower()
        failed = observer.wait_for(Event, lambda e: e.kind == "build_failed", "build_failed")
        assert failed.data["runtime"] == "tensorrt"
        assert failed.data["seconds"] >= 0  # what the failed build cost
        event = observer.wait_for(Event, lambda e: e.kind == "fallback", "the fallback event")
        assert event.data["reason"] == slot.fallback_reason
        assert event.message.startswith("classifier 1 falls back to ONNX Runtime: ")
        assert reported.serve_url is not None
        assert infer(reported.serve_url)["model_version"] == "1"
        metrics = httpx.get(f"{reported.serve_url}/metrics", timeout=10).text
        assert 'runtime="onnxruntime",fallback="true"} 1' in metrics
    finally:
        agent.stop()

    with observer.cond:
        observer.messages.clear()  # what the restarted agent says, only
    again = tensorrt_agent(settings_for(mosquitto, topics, tmp_path))  # restart: from the journal
    try:
        restored = observer.wait_for(
            ReportedState,
            lambda r: serving(r) and r.slots[0].fallback_reason is not None,
            "classifier 1 serving again after the restart",
            60,
        )
        assert restored.slots[0].runtime == "onnxruntime"
        assert restored.serve_url is not None
        assert infer(restored.serve_url)["model_version"] == "1"
        builds = [m for m in observer.messages if isinstance(m, Event) and "build" in m.kind]
        assert builds == [], "TensorRT was built again after the restart"
    finally:
        again.stop()


@pytest.mark.usefixtures("no_tensorrt_python")
def test_fallback_none_fails_the_slot_with_tensorrts_reason(
    mosquitto: str,
    topics: Topics,
    observer: Observer,
    artifact_server: ArtifactServer,
    tmp_path: Path,
) -> None:
    v1 = artifact_server.add("v1.onnx", classifier(seed=1))
    agent = tensorrt_agent(settings_for(mosquitto, topics, tmp_path))
    try:
        observer.publish_desired(with_config(desired(1, "1", v1), DelegateConfig(fallback="none")))
        failed = observer.wait_for(
            ReportedState,
            lambda r: any(s.phase is SlotPhase.FAILED for s in r.slots),
            "classifier 1 failed",
            60,
        )
        slot = failed.slots[0]
        assert slot.last_error is not None
        assert slot.last_error.startswith("TensorRT build refused")
        assert slot.fallback_reason is None
        assert not [m for m in observer.messages if isinstance(m, Event) and m.kind == "fallback"]
    finally:
        agent.stop()
