"""A device whose stored facts this controller cannot read.

Facts are stored as JSON and read back as the wire model; a document written by a controller of
another version (here a future ``jetfleet/facts/2``) no longer validates. Such a device has no
hardware class: a rollout by class leaves it out (it used to answer 500), the API shows no facts,
and the dashboard says the facts are unreadable and why.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
from sqlalchemy import update

from controller.db.schema import Device
from controller.db.session import make_engine
from controller.demo.sample_models import classifier
from controller.server import Controller
from shared.codec import encode
from shared.topics import Channel, Topics
from tests.integration.controller.conftest import MqttPeer, poll, set_labels
from tests.integration.controller.test_configs import ORIN, jetson_reported

NEWER_FACTS = {
    "schema": "jetfleet/facts/2",
    "hostname": "gw-2",
    "os": "Linux",
    "arch": "aarch64",
    "jetson": {"module": "Jetson Orin Nano 8GB", "jetpack": "6.2"},
}


def test_unreadable_stored_facts_leave_the_device_out_of_class_targets_and_say_so(
    db_controller: Controller,
    db_api: httpx.Client,
    db_url: str,
    peers: Callable[[str], MqttPeer],
    prefix: str,
) -> None:
    api = db_api
    peer = peers(db_controller.broker_url)
    for device_id in ("gw-1", "gw-2"):
        peer.publish(
            Topics(prefix).device(device_id, Channel.REPORTED),
            encode(jetson_reported(device_id, {}, dla_cores=0)),
        )
    poll(lambda: len(api.get("/api/v1/devices").json()) == 2, what="two devices")
    for device_id in ("gw-1", "gw-2"):
        set_labels(api, device_id, {"site": "a"})
    assert api.put("/api/v1/models/classifier/versions/1", content=classifier()).status_code == 201
    engine = make_engine(db_url)
    try:
        with engine.begin() as conn:
            conn.execute(update(Device).where(Device.id == "gw-2").values(facts=NEWER_FACTS))
    finally:
        engine.dispose()

    devices = {d["id"]: d for d in api.get("/api/v1/devices").json()}
    assert (devices["gw-1"]["hardware_class"], devices["gw-1"]["facts"]["arch"]) == (
        ORIN,
        "aarch64",
    )
    assert (devices["gw-2"]["hardware_class"], devices["gw-2"]["facts"]) == (None, None)

    created = api.post(
        "/api/v1/rollouts",
        json={"model": "classifier", "version": "1", "targets": {"hardware_class": ORIN}},
    )
    assert created.status_code == 201, created.text
    assert [t["device_id"] for t in created.json()["targets"]] == ["gw-1"]

    summary = {d["id"]: d for d in api.get("/api/v1/fleet/summary").json()["devices"]}
    assert summary["gw-1"]["hardware"] == "Jetson Orin Nano 8GB"
    assert summary["gw-2"]["hardware"] == "facts unreadable"

    page = api.get("/dashboard/devices/gw-2")
    assert page.status_code == 200, page.text
    assert (
        "facts unreadable (schema: Input should be &#x27;jetfleet/facts/1&#x27;): stored by a "
        "controller of another version; the device&#x27;s next report replaces them"
    ) in page.text
    readable = api.get("/dashboard/devices/gw-1").text
    assert "Jetson Orin Nano 8GB" in readable
    assert (
        "<tr data-fact='jetpack'><th>JetPack / L4T</th><td>JetPack 6.2 / L4T —</td></tr>"
        in readable
    )
    assert "<tr data-fact='dla'><th>DLA cores</th><td>0</td></tr>" in readable
    assert "<tr data-fact='gpu'><th>GPU</th><td>—</td></tr>" in readable
    assert "<tr data-fact='agent'><th>Agent version</th><td>test</td></tr>" in readable
