"""Fleet-wide engine poisoning, against a real controller (uvicorn, SQLite
and PostgreSQL, Mosquitto) with device tokens, facts reported over MQTT and real ORT builds.

The probe's attack: an x86 CPU gateway stored junk bytes as a TensorRT 10.3 / Orin engine, which
the controller then served, signed with the fleet key, to every Orin twin. Now a device stores an
engine only for the validity its reported facts give, the store records who uploaded each build,
and twins get a device's build only once an operator approved it (or trusts the class).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from agent.engines.cache import EngineCache
from agent.engines.identity import EngineIdentity, identify
from agent.engines.resolver import EngineResolver, Resolved
from agent.engines.store_client import StoreClient
from controller.cli.main import cli
from controller.demo.sample_models import classifier
from controller.server import Controller
from shared.codec import encode
from shared.delegate import DelegateConfig
from shared.engine_keys import ContentKey, TuningTag, engine_key
from shared.engine_validity import ort_validity
from shared.engines import EngineManifest
from shared.facts import DeviceFacts, GpuFacts
from shared.hardware_class import hardware_class
from shared.messages import ReportedState
from shared.topics import Channel, Topics
from tests.integration.controller.conftest import MqttPeer, admin_token, bearer, new_token, poll
from tests.integration.controller.device_reports import report_facts, trust_device_builds
from tests.integration.controller.test_engine_store import ENGINE_BYTES, manifest

JUNK = b"\xde\xad junk that is no TensorRT plan" * 64
X86 = DeviceFacts(
    hostname="x86-gw",
    os="Debian 12",
    arch="x86_64",
    onnxruntime_version=importlib.metadata.version("onnxruntime"),
)
"""An x86 CPU gateway, like the probe's: no TensorRT, no GPU; class cpu-x86_64."""
CONFIG = DelegateConfig()


def report(controller: Controller, api: httpx.Client, device_id: str) -> None:
    """``device_id`` reports the X86 facts over MQTT, as an agent does; wait until stored."""
    report_facts(controller, api, device_id, X86.model_copy(update={"hostname": device_id}))


def own_build(data: bytes, built_by: str, onnx_sha256: str = "b" * 64) -> EngineManifest:
    """The manifest an X86 gateway's ORT build of ``data`` has (its own validity)."""
    validity = ort_validity(X86, ("CPUExecutionProvider",))
    content = ContentKey.of(onnx_sha256, CONFIG)
    return EngineManifest(
        engine_key=engine_key(validity, content),
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        validity=validity,
        content=content,
        tuning=TuningTag(),
        built_by=built_by,
        build_seconds=1.5,
        created_at=datetime(2026, 1, 1, tzinfo=timezone.utc),
    )


def as_device(controller: Controller, device_id: str) -> httpx.Client:
    token = new_token(controller, device_id, "device", device_id=device_id)
    return httpx.Client(base_url=controller.http_url, timeout=10, headers=bearer(token))


def upload(client: httpx.Client, data: bytes, m: EngineManifest) -> httpx.Response:
    """Bytes, then manifest, as an agent uploads a build; the manifest PUT's answer."""
    assert client.post("/api/v1/artifacts", content=data).status_code in (200, 201)
    return client.put(f"/api/v1/engines/{m.engine_key}", json=m.model_dump(mode="json"))


@pytest.fixture
def cli_as_admin(controller: Controller) -> Callable[..., Result]:
    runner = CliRunner(env={"JETFLEET_TOKEN": admin_token(controller, "alice")})

    def invoke(*args: str) -> Result:
        return runner.invoke(cli, [*args, "--url", controller.http_url])

    return invoke


def test_a_device_may_not_store_an_engine_for_another_class_and_nothing_is_stored(
    db_controller: Controller,
    db_api: httpx.Client,
) -> None:
    report(db_controller, db_api, "x86-gw")
    forged = manifest(JUNK, built_by="x86-gw")  # TensorRT 10.3.0.30, Orin p3767-0005, sm 8.7
    orin_ort = own_build(JUNK, "x86-gw").model_copy(
        update={
            "validity": ort_validity(X86, ("CPUExecutionProvider",)).model_copy(
                update={"device_name": "jetson-orin-nano-8gb/jp6.2", "platform": "linux-aarch64"}
            )
        }
    )
    orin_ort = orin_ort.model_copy(
        update={"engine_key": engine_key(orin_ort.validity, orin_ort.content)}
    )
    with as_device(db_controller, "x86-gw") as attacker:
        refused = upload(attacker, JUNK, forged)
        assert refused.status_code == 403, refused.text
        assert refused.json()["detail"].startswith(
            "device 'x86-gw' (class cpu-x86_64) reports no TensorRT version, so it cannot "
            "upload a tensorrt engine for p3767-0005"
        )
        other_class = upload(attacker, JUNK, orin_ort)
        assert other_class.status_code == 403, other_class.text
        detail = other_class.json()["detail"]
        assert "validity.device_name is 'jetson-orin-nano-8gb/jp6.2', its facts give " in detail
        assert "validity.platform is 'linux-aarch64', its facts give 'linux-x86_64'" in detail

    assert db_api.get("/api/v1/engines").json() == []
    with as_device(db_controller, "orin-twin") as twin:
        for key in (forged.engine_key, orin_ort.engine_key):
            assert twin.get(f"/api/v1/engines/{key}").status_code == 404
    audit = db_api.get("/api/v1/audit", params={"actor": "x86-gw"}).json()
    assert [r["status"] for r in audit if r["action"] == "PUT /api/v1/engines/{key}"] == [403, 403]


def test_a_device_that_has_not_reported_its_facts_may_not_store_an_engine(
    controller: Controller, api: httpx.Client
) -> None:
    with as_device(controller, "silent-gw") as silent:
        refused = upload(silent, ENGINE_BYTES, own_build(ENGINE_BYTES, "silent-gw"))
    assert refused.status_code == 403
    assert refused.json()["detail"].startswith(
        "device 'silent-gw' has reported no facts yet: the controller accepts an engine from a "
        "device only for that device's own validity, so its agent must report"
    )
    assert api.get("/api/v1/engines").json() == []


def test_a_device_stores_its_own_build_and_the_store_records_who_built_it(
    db_controller: Controller,
    db_api: httpx.Client,
) -> None:
    report(db_controller, db_api, "x86-gw")
    own = own_build(ENGINE_BYTES, "x86-gw")
    with as_device(db_controller, "x86-gw") as gateway:
        assert upload(gateway, ENGINE_BYTES, own).status_code == 201
        assert upload(gateway, ENGINE_BYTES, own).status_code == 200
        assert gateway.get(f"/api/v1/engines/{own.engine_key}").json()["sha256"] == own.sha256
    operator_build = manifest(ENGINE_BYTES, built_by="lab-orin")
    assert upload(db_api, ENGINE_BYTES, operator_build).status_code == 201

    listed = {e["engine_key"]: e for e in db_api.get("/api/v1/engines").json()}
    device_row, operator_row = listed[own.engine_key], listed[operator_build.engine_key]
    assert (device_row["uploader"], device_row["uploaded_by"], device_row["built_by"]) == (
        "device",
        "x86-gw",
        "x86-gw",
    )
    assert (device_row["hardware_class"], device_row["trust"], device_row["status"]) == (
        "cpu-x86_64",
        "approval",
        "pending",
    )
    assert (operator_row["uploader"], operator_row["uploaded_by"], operator_row["status"]) == (
        "operator",
        "tests-admin",
        "operator",
    )
    assert operator_row["built_by"] == "lab-orin"


def test_engines_ls_shows_who_built_each_engine_and_whether_twins_get_it(
    controller: Controller,
    api: httpx.Client,
    cli_as_admin: Callable[..., Result],
) -> None:
    report(controller, api, "x86-gw")
    own = own_build(ENGINE_BYTES, "x86-gw")
    with as_device(controller, "x86-gw") as gateway:
        assert upload(gateway, ENGINE_BYTES, own).status_code == 201

    shown = cli_as_admin("engines", "ls")
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
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
    assert lines[1].split()[:3] == [own.engine_key[:12], "x86-gw", "(device)"]
    assert lines[1].split()[-4:] == ["default", "pending", str(len(ENGINE_BYTES)), "1.5"]
    assert "jetfleet engines approve KEY" in lines[2]
    as_json = cli_as_admin("engines", "ls", "--json")
    assert [(e["uploaded_by"], e["uploader"]) for e in _json(as_json)] == [("x86-gw", "device")]


def _json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@dataclass
class Gateway:
    """One x86 gateway's real engine resolver (ORT builds) over the real controller."""

    name: str
    resolver: EngineResolver
    store: StoreClient


@pytest.fixture
def gateways(
    controller: Controller,
    api: httpx.Client,
    tmp_path: Path,
) -> Iterator[Callable[[str], Gateway]]:
    made: list[Gateway] = []

    def make(name: str) -> Gateway:
        report(controller, api, name)
        token = new_token(controller, name, "device", device_id=name)
        store = StoreClient(controller.http_url, token=token)
        cache = EngineCache(tmp_path / name / "engines", 1 << 30)
        resolver = EngineResolver(cache, store, name, build_timeout_s=60, lease_ttl_s=60)
        made.append(Gateway(name, resolver, store))
        return made[-1]

    yield make
    for gateway in made:
        gateway.store.close()


@pytest.fixture
def model(tmp_path: Path) -> tuple[Path, EngineIdentity]:
    data = classifier(seed=19)
    path = tmp_path / "model.onnx"
    path.write_bytes(data)
    return path, identify("onnxruntime", X86, hashlib.sha256(data).hexdigest(), CONFIG)


def resolve(gateway: Gateway, model: tuple[Path, EngineIdentity]) -> Resolved:
    return gateway.resolver.resolve("classifier", model[0], model[1], CONFIG)


def test_in_approval_mode_twins_build_their_own_until_an_operator_approves_then_pull(
    controller: Controller,
    gateways: Callable[[str], Gateway],
    model: tuple[Path, EngineIdentity],
    cli_as_admin: Callable[..., Result],
) -> None:
    builder = gateways("gw-a")
    built = resolve(builder, model)
    assert built.source == "built"
    key = built.key

    twin = gateways("gw-b")
    own = resolve(twin, model)
    assert (own.source, own.key) == ("built", key)  # no pull, no failure: it built its own
    with as_device(controller, "gw-c") as third, as_device(controller, "gw-d") as fourth:
        assert third.get(f"/api/v1/engines/{key}").status_code == 404
        leases = [
            c.post(f"/api/v1/engines/{key}/lease", json={"device_id": d}).json()["granted"]
            for c, d in ((third, "gw-c"), (fourth, "gw-d"))
        ]
        assert leases == [True, True]  # nobody queues behind a build it would not get
    with as_device(controller, "gw-a") as same_builder:
        assert same_builder.get(f"/api/v1/engines/{key}").status_code == 200
        refused = same_builder.post(f"/api/v1/engines/{key}/approve", json={})
        assert refused.status_code == 403  # a device cannot approve its own build

    approved = cli_as_admin("engines", "approve", key[:12])
    assert approved.exit_code == 0, approved.output
    assert approved.output.startswith(
        f"approved engine {key[:12]} (default) built by gw-a (device)"
    )
    pulled = resolve(gateways("gw-e"), model)
    assert pulled.source == "pulled"
    assert pulled.manifest.built_by == "gw-a"
    row = _json(cli_as_admin("engines", "ls", "--json"))[0]
    assert (row["status"], row["approved_by"]) == ("approved", "alice")


def test_a_twin_waiting_on_the_builders_lease_builds_once_the_build_is_held_for_approval(
    controller: Controller,
    gateways: Callable[[str], Gateway],
    model: tuple[Path, EngineIdentity],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The builder uploads and releases its lease; the store answers the waiting twin 404 for a
    pending build, so the twin must take the lease then, not idle until the builder's lease
    (15 minutes here) would have expired."""
    caplog.set_level(logging.INFO, logger="agent.engines.resolver")
    builder, twin = gateways("gw-a"), gateways("gw-b")
    key, tag = model[1].key, model[1].tuning.label()
    assert builder.store.lease(key, "gw-a", 900, tag).granted
    resolved: list[Resolved | BaseException] = []

    def twin_resolves() -> None:
        try:
            resolved.append(resolve(twin, model))
        except BaseException as exc:  # reported by the assertions below
            resolved.append(exc)

    waiting = threading.Thread(target=twin_resolves, daemon=True)
    waiting.start()
    poll(
        lambda: any("waiting to pull it" in r.getMessage() for r in caplog.records),
        what="the twin to wait on gw-a's lease",
    )
    assert resolve(builder, model).source == "built"  # uploaded (pending), lease released

    waiting.join(60)
    assert not waiting.is_alive(), "the twin still waits on a lease its holder released"
    assert len(resolved) == 1
    answer = resolved[0]
    assert isinstance(answer, Resolved), answer
    assert (answer.source, answer.key) == ("built", key)


def test_trusting_a_class_shares_its_device_builds_with_twins_at_once(
    controller: Controller,
    api: httpx.Client,
    cli_as_admin: Callable[..., Result],
) -> None:
    for name in ("x86-gw", "x86-twin"):
        report(controller, api, name)
    own = own_build(ENGINE_BYTES, "x86-gw")
    with as_device(controller, "x86-gw") as gateway:
        assert upload(gateway, ENGINE_BYTES, own).status_code == 201
    with as_device(controller, "x86-twin") as twin:
        assert twin.get(f"/api/v1/engines/{own.engine_key}").status_code == 404
        trusted = cli_as_admin("engines", "trust", "cpu-x86_64", "--devices")
        assert trusted.exit_code == 0, trusted.output
        assert trusted.output == (
            "cpu-x86_64: twins pull device builds as soon as they are stored\n"
        )
        assert twin.get(f"/api/v1/engines/{own.engine_key}").status_code == 200
        assert twin.put("/api/v1/engine-trust", json={}).status_code == 403
    listed = _json(cli_as_admin("engines", "trust", "--json"))
    assert [(t["hardware_class"], t["mode"], t["set_by"]) for t in listed] == [
        ("default", "approval", None),
        ("cpu-x86_64", "devices", "alice"),
    ]
    bad = cli_as_admin("engines", "trust", "Orin Nano", "--devices")
    assert bad.exit_code == 1
    assert "invalid hardware class 'Orin Nano'" in bad.output


def test_an_operators_build_replaces_a_pending_device_build(
    controller: Controller,
    api: httpx.Client,
) -> None:
    report(controller, api, "x86-gw")
    device_build = own_build(JUNK, "x86-gw")
    with as_device(controller, "x86-gw") as gateway:
        assert upload(gateway, JUNK, device_build).status_code == 201
    operator_build = own_build(ENGINE_BYTES, "build-farm")
    assert operator_build.engine_key == device_build.engine_key
    assert upload(api, ENGINE_BYTES, operator_build).status_code == 201
    with as_device(controller, "x86-twin") as twin:
        served = twin.get(f"/api/v1/engines/{operator_build.engine_key}")
    assert served.status_code == 200
    assert served.json()["sha256"] == operator_build.sha256
    with as_device(controller, "x86-gw") as gateway:
        again = upload(gateway, JUNK, device_build)
    assert again.status_code == 409


RTX = X86.model_copy(update={"gpu": GpuFacts(name="NVIDIA RTX A2000", compute_capability="8.6")})
"""The profile the probe's gateway claimed after enrolment: an x86 box with an RTX A2000."""


def test_a_device_that_reports_another_class_may_not_upload_for_it_until_accepted(
    db_controller: Controller, db_api: httpx.Client
) -> None:
    """A gateway credential reported a fake hardware profile on its own
    ``reported`` topic, then uploaded an engine for that class; once an operator trusted the
    class's device builds, twins got the junk signed with the fleet key. The class a device may
    upload for is now the one it was first seen with, and the change is shown to the operator."""
    runner = CliRunner(env={"JETFLEET_TOKEN": admin_token(db_controller, "alice")})

    def cli_as_admin(*args: str) -> Result:
        return runner.invoke(cli, [*args, "--url", db_controller.http_url])

    report(db_controller, db_api, "x86-gw")
    report_facts_again(db_controller, db_api, "x86-gw", RTX)
    junk = own_build(JUNK, "x86-gw").model_copy(
        update={"validity": ort_validity(RTX, ("CPUExecutionProvider",))}
    )
    junk = junk.model_copy(update={"engine_key": engine_key(junk.validity, junk.content)})
    trust_device_builds(db_api, "nvidia-rtx-a2000")

    with as_device(db_controller, "x86-gw") as attacker:
        refused = upload(attacker, JUNK, junk)
    assert refused.status_code == 403, refused.text
    assert refused.json()["detail"] == (
        "device 'x86-gw' was first seen as class cpu-x86_64 and now reports class "
        "nvidia-rtx-a2000: it may upload engines only for cpu-x86_64 until an operator accepts "
        "the change (`jetfleet devices accept-class x86-gw`)"
    )
    with as_device(db_controller, "rtx-twin") as twin:
        assert twin.get(f"/api/v1/engines/{junk.engine_key}").status_code == 404

    listed = cli_as_admin("devices", "ls")
    assert listed.exit_code == 0, listed.output
    assert "(CLASS CHANGED)" in listed.output
    assert "jetfleet devices accept-class x86-gw" in listed.output
    shown = db_api.get("/api/v1/devices/x86-gw").json()
    assert (shown["pinned_class"], shown["hardware_class"], shown["class_changed"]) == (
        "cpu-x86_64",
        "nvidia-rtx-a2000",
        True,
    )

    accepted = cli_as_admin("devices", "accept-class", "x86-gw", "--json")
    assert accepted.exit_code == 0, accepted.output
    assert json.loads(accepted.output)[0]["pinned_class"] == "nvidia-rtx-a2000"
    with as_device(db_controller, "x86-gw") as device:
        stored = upload(device, JUNK, junk)
        assert stored.status_code == 201, stored.text  # the operator's word now
    assert "CLASS CHANGED" not in cli_as_admin("devices", "ls").output


def report_facts_again(
    controller: Controller, api: httpx.Client, device_id: str, facts: DeviceFacts
) -> None:
    """``device_id`` reports other facts; returns once the controller stored them."""
    peer = MqttPeer(controller.broker_url).connect()
    try:
        state = ReportedState(
            device_id=device_id,
            observed_generation=-1,
            reported_at=datetime.now(timezone.utc),
            facts=facts.model_copy(update={"hostname": device_id}),
            agent_version="test",
        )
        topic = Topics(controller.settings.topic_prefix).device(device_id, Channel.REPORTED)
        peer.publish(topic, encode(state))
        expected = hardware_class(facts)
        poll(
            lambda: (
                api.get(f"/api/v1/devices/{device_id}").json()["hardware_class"] == expected or None
            ),
            what=f"{device_id}'s new facts",
        )
    finally:
        peer.close()
