"""The slot pipeline with real parts: HTTP downloads, ONNX Runtime builds and loads, a temp state.

Each test drives the stages the way the daemon does (``plan`` → ``pipeline.run``) and asserts
what a user sees: the phases the device reports, the events on its timeline, the version that
answers, and the view the jobs thread reads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from agent.hardware.facts import probe_facts
from agent.jobs.power_facts import PowerTuning
from agent.serving.batching import Batcher
from agent.serving.core import ModelRegistry
from agent.settings import AgentSettings
from agent.slots.assembly import SlotParts, assemble_slots
from agent.slots.plan import Actual, Load, Unload, plan
from agent.slots.state_store import downloaded
from agent.swap.budget import MemoryBudget
from agent.swap.headroom import HeadroomProbe
from agent.swap.loaders import loader_for
from agent.trust.store import TrustStore
from agent.trust.verifier import ArtifactVerifier
from controller.demo.sample_models import classifier
from shared.messages import ArtifactRef, DesiredState, ModelSlot, SlotPhase
from tests.integration.agent.artifact_server import ArtifactServer

DEVICE = "gw-pipeline"


@dataclass
class Seen:
    """What the device showed: the phases of each report and the events, in order."""

    reports: list[dict[str, SlotPhase]] = field(default_factory=list)
    events: list[tuple[str, str | None, str, dict[str, Any]]] = field(default_factory=list)

    def emit(self, kind: str, slot: str | None, message: str, **data: Any) -> None:
        self.events.append((kind, slot, message, data))

    def kinds(self, *wanted: str) -> list[str]:
        return [k for k, *_ in self.events if not wanted or k in wanted]

    def last(self, kind: str) -> tuple[str | None, str, dict[str, Any]]:
        _, slot, message, data = [e for e in self.events if e[0] == kind][-1]
        return slot, message, data

    def phases(self, name: str) -> list[SlotPhase]:
        return [r[name] for r in self.reports if name in r]


@dataclass
class Device:
    """One agent's slot side on a temp state directory."""

    parts: SlotParts
    state_dir: Path
    registry: ModelRegistry
    power: PowerTuning
    seen: Seen

    def apply(self, desired: DesiredState) -> None:
        """What the daemon does with an accepted document."""
        self.parts.table.accept(desired)
        self.reconcile()

    def reconcile(self) -> None:
        table = self.parts.table
        assert table.desired is not None
        actual = Actual(slots=table.actual(), downloaded=downloaded(self.state_dir))
        self.parts.pipeline.run(plan(table.desired, actual))

    def serving(self, name: str) -> str | None:
        entry = self.registry.get(name)
        return entry.version if entry is not None else None


def make_device(state_dir: Path, seen: Seen) -> Device:
    settings = AgentSettings(device_id=DEVICE, state_dir=state_dir)
    registry = ModelRegistry()
    power = PowerTuning(probe_facts(), seen.emit)
    device: Device | None = None

    def report() -> None:
        assert device is not None
        seen.reports.append({s.name: s.phase for s in device.parts.table.statuses()})

    parts = assemble_slots(
        settings,
        device_id=DEVICE,
        runtime="onnxruntime",
        registry=registry,
        batcher=Batcher(),
        budget=MemoryBudget(HeadroomProbe("cpu")),
        verifier=ArtifactVerifier(TrustStore.open(state_dir), DEVICE, emit=seen.emit),
        power=power,
        loader=loader_for("onnxruntime"),
        custom_loader=False,
        emit=seen.emit,
        report=report,
        stopping=lambda: False,
        supervising=lambda: False,
    )
    device = Device(parts, state_dir, registry, power, seen)
    return device


@pytest.fixture
def server() -> Iterator[ArtifactServer]:
    server = ArtifactServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def devices() -> Iterator[list[Device]]:
    made: list[Device] = []
    yield made
    for device in made:
        device.registry.close_all()
        device.parts.close()


@pytest.fixture
def device(tmp_path: Path, devices: list[Device]) -> Device:
    made = make_device(tmp_path / "state", Seen())
    devices.append(made)
    return made


def document(generation: int, *slots: ModelSlot) -> DesiredState:
    return DesiredState(
        device_id=DEVICE, generation=generation, issued_at=datetime.now(timezone.utc), slots=slots
    )


def model(version: str, artifact: ArtifactRef) -> ModelSlot:
    return ModelSlot(name="classifier", version=version, artifact=artifact)


def test_a_new_model_is_downloaded_built_validated_and_served(
    device: Device, server: ArtifactServer
) -> None:
    v1 = model("1", server.add("v1.onnx", classifier(seed=1)))

    device.apply(document(1, v1))

    assert device.seen.phases("classifier") == [
        SlotPhase.DOWNLOADING,
        SlotPhase.BUILDING,
        SlotPhase.VALIDATING,
        SlotPhase.SERVING,
    ]
    assert device.seen.kinds("download_started", "download_done", "swap", "error") == [
        "download_started",
        "download_done",
        "swap",
    ]
    slot, message, data = device.seen.last("swap")
    assert (slot, message) == ("classifier", "classifier now serves 1 (warm swap)")
    assert (data["from_version"], data["to_version"]) == (None, "1")
    assert (data["engine_source"], data["swap_mode"], data["validated"]) == ("built", "warm", False)
    assert device.serving("classifier") == "1"
    status = device.parts.table["classifier"].status()
    assert (status.active_version, status.engine_source, status.runtime) == (
        "1",
        "built",
        "onnxruntime",
    )
    assert status.last_error is None


def test_an_update_that_does_not_build_fails_while_the_old_version_serves(
    device: Device, server: ArtifactServer
) -> None:
    device.apply(document(1, model("1", server.add("v1.onnx", classifier(seed=1)))))
    broken = model("2", server.add("v2.onnx", b"these bytes are not an ONNX model"))
    device.seen.reports.clear()

    device.apply(document(2, broken))

    assert device.seen.phases("classifier") == [
        SlotPhase.DOWNLOADING,
        SlotPhase.BUILDING,
        SlotPhase.FAILED,
    ]
    slot, message, data = device.seen.last("error")
    assert slot == "classifier"
    assert data["version"] == "2"
    record = device.parts.table["classifier"]
    assert record.last_error == message
    assert record.retry is False, "a build failure is permanent: no retry"
    assert device.serving("classifier") == "1"
    assert record.status().active_version == "1"
    before = len(device.seen.events)
    device.reconcile()
    assert len(device.seen.events) == before, "the failed artifact is not tried again"


def test_a_failed_download_is_retried_and_skips_the_load_of_that_pass(
    device: Device, server: ArtifactServer
) -> None:
    v1 = model("1", server.add("v1.onnx", classifier(seed=1)))
    server.answers = [503]

    device.apply(document(1, v1))

    assert device.seen.phases("classifier") == [SlotPhase.DOWNLOADING, SlotPhase.FAILED]
    assert device.seen.kinds("download_started", "download_failed", "error", "swap") == [
        "download_started",
        "download_failed",
    ]
    assert device.seen.last("download_failed")[2]["version"] == "1"
    assert device.parts.table.retrying()

    device.reconcile()

    assert device.serving("classifier") == "1"
    assert device.parts.table["classifier"].retry is False
    assert not device.parts.table.retrying()


def test_a_failed_retune_keeps_the_model_serving_and_is_not_retried(
    device: Device, server: ArtifactServer
) -> None:
    v1 = model("1", server.add("v1.onnx", classifier(seed=1)))
    device.apply(document(1, v1))
    device.seen.reports.clear()
    device.power.facts = device.power.facts.model_copy(update={"onnxruntime_version": None})

    device.parts.pipeline.run([Load(v1, retune=True)])

    assert device.seen.phases("classifier") == [SlotPhase.SERVING]
    slot, message, _ = device.seen.last("error")
    assert slot == "classifier"
    assert message.startswith("retuning for the current power mode failed: cannot name the engine")
    record = device.parts.table["classifier"]
    assert record.retune_failed
    assert record.last_error == message
    assert record.status().phase is SlotPhase.SERVING
    assert device.serving("classifier") == "1"


def test_unloading_a_model_stops_serving_it_and_says_so(
    device: Device, server: ArtifactServer
) -> None:
    device.apply(document(1, model("1", server.add("v1.onnx", classifier(seed=1)))))
    device.seen.reports.clear()

    device.parts.pipeline.run([Unload("classifier")])

    assert device.serving("classifier") is None
    assert "classifier" not in device.parts.table
    assert device.seen.reports == [{}]
    slot, message, data = device.seen.last("swap")
    assert (slot, message, data) == ("classifier", "unloaded classifier 1", {"to_version": None})
    assert device.parts.engines.pinned() == set()


def test_a_restarted_agent_serves_the_journaled_engine_from_its_cache(
    tmp_path: Path, device: Device, server: ArtifactServer, devices: list[Device]
) -> None:
    device.apply(document(1, model("1", server.add("v1.onnx", classifier(seed=1)))))
    key = device.parts.table["classifier"].status().engine_key

    again = make_device(tmp_path / "state", Seen())
    devices.append(again)
    again.parts.restore()

    assert again.serving("classifier") == "1"
    status = again.parts.table["classifier"].status()
    assert (status.phase, status.engine_key, status.engine_source) == (
        SlotPhase.SERVING,
        key,
        "cached",
    )
    assert again.seen.events == [], "a restore is no swap"


def test_the_jobs_thread_sees_whole_snapshots_published_after_each_change(
    device: Device, server: ArtifactServer
) -> None:
    before = device.parts.table.view
    v1 = model("1", server.add("v1.onnx", classifier(seed=1)))

    device.apply(document(1, v1))

    view = device.parts.table.view
    assert before.slots == (), "a view taken before never changes"
    assert before.desired is None
    assert view.desired is not None
    assert view.desired.generation == 1
    record = view.get("classifier")
    assert record is not None
    assert (record.phase, record.active_version) == (SlotPhase.SERVING, "1")
    assert view.engine_keys() == {"classifier": record.status().engine_key}
    assert view.swaps == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.phase = SlotPhase.FAILED  # type: ignore[misc]
