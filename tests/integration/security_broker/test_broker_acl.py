"""The broker, not the controller, keeps devices apart: on Mosquitto (dynamic security, the
configuration `jetfleet broker config` writes) and on the embedded broker alike."""

from __future__ import annotations

import time
from collections.abc import Callable

from shared.topics import Channel
from tests.integration.controller.conftest import poll
from tests.integration.security_broker.acl_broker import REFUSED_LOGIN, Peer
from tests.integration.security_broker.conftest import Secured

SETTLE_S = 1.0
"""How long a refused message gets to show up after a later control message did arrive."""

PeerFactory = Callable[[str | None, str | None], Peer]


def _device(secured: Secured, peer: PeerFactory, device_id: str) -> Peer:
    identity = secured.enrol(device_id)
    p = peer(identity["broker_username"], identity["broker_password"])
    assert str(p.connect()) == "Success"
    return p


def test_a_device_cannot_publish_into_another_devices_topics(
    secured: Secured, peer: PeerFactory
) -> None:
    a = _device(secured, peer, "gw-a")
    b = _device(secured, peer, "gw-b")
    observer = peer(secured.controller_user, secured.controller_password)
    assert str(observer.connect()) == "Success"
    agent_channels = (Channel.REPORTED, Channel.TELEMETRY, Channel.EVENTS, Channel.STATUS)
    for channel in agent_channels:
        assert not observer.subscribe(secured.topics.every_device(channel)).is_failure
    b_desired = secured.topic("gw-b", Channel.DESIRED)
    assert not b.subscribe(b_desired).is_failure

    for channel in (*agent_channels, Channel.DESIRED):
        a.publish(secured.topic("gw-b", channel), b"forged by gw-a", retain=True)
    control = secured.topic("gw-a", Channel.EVENTS)
    a.publish(control, b"control")

    poll(lambda: observer.got(control), what="gw-a's control message")
    time.sleep(SETTLE_S)
    for channel in agent_channels:
        assert observer.got(secured.topic("gw-b", channel)) == []
    assert b.got(b_desired) == []
    late = peer(secured.controller_user, secured.controller_password)
    assert str(late.connect()) == "Success"
    assert not late.subscribe(secured.topics.every_device(Channel.REPORTED)).is_failure
    late_control = secured.topic("gw-a", Channel.REPORTED)
    a.publish(late_control, b"retained control", retain=True)
    poll(lambda: late.got(late_control), what="gw-a's retained report")
    assert late.got(secured.topic("gw-b", Channel.REPORTED)) == []


def test_a_device_cannot_read_another_devices_desired_state(
    secured: Secured, peer: PeerFactory
) -> None:
    a = _device(secured, peer, "gw-a")
    controller = peer(secured.controller_user, secured.controller_password)
    assert str(controller.connect()) == "Success"
    a_desired = secured.topic("gw-a", Channel.DESIRED)
    b_desired = secured.topic("gw-b", Channel.DESIRED)

    assert a.subscribe(b_desired).is_failure
    assert a.subscribe(secured.topics.every_device(Channel.DESIRED)).is_failure
    assert a.subscribe(secured.topics.every_device(Channel.REPORTED)).is_failure
    assert not a.subscribe(a_desired).is_failure

    controller.publish(b_desired, b"for gw-b only")
    controller.publish(a_desired, b"for gw-a")
    poll(lambda: a.got(a_desired), what="gw-a's own desired state")
    time.sleep(SETTLE_S)
    assert a.got(b_desired) == []


def test_a_revoked_device_is_disconnected_and_cannot_reconnect(
    secured: Secured, peer: PeerFactory
) -> None:
    identity = secured.enrol("gw-r")
    device = peer(identity["broker_username"], identity["broker_password"])
    assert str(device.connect()) == "Success"
    token = {"Authorization": f"Bearer {identity['api_token']}"}
    assert secured.api.get("/api/v1/whoami", headers=token).status_code == 200

    revoked = secured.api.post("/api/v1/devices/gw-r/revoke")
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["revoked_at"] is not None

    poll(lambda: device.disconnects, what="the broker to close gw-r's connection")
    again = peer(identity["broker_username"], identity["broker_password"])
    assert str(again.connect()) in REFUSED_LOGIN
    assert secured.api.get("/api/v1/whoami", headers=token).status_code == 401


def test_anonymous_clients_and_wrong_passwords_are_refused(
    secured: Secured, peer: PeerFactory
) -> None:
    identity = secured.enrol("gw-p")
    assert str(peer(None, None).connect()) in REFUSED_LOGIN
    assert str(peer(identity["broker_username"], "not-the-password").connect()) in REFUSED_LOGIN
    assert str(peer("dev-gw-unknown", identity["broker_password"]).connect()) in REFUSED_LOGIN


def test_reenrolment_replaces_the_credential(secured: Secured, peer: PeerFactory) -> None:
    first = secured.enrol("gw-e")
    old = peer(first["broker_username"], first["broker_password"])
    assert str(old.connect()) == "Success"
    second = secured.enrol("gw-e", bound=True)  # re-enrolment needs a token bound to gw-e
    assert second["broker_password"] != first["broker_password"]

    poll(lambda: old.disconnects, what="the old credential's connection to close")
    assert str(peer(first["broker_username"], first["broker_password"]).connect()) in (
        REFUSED_LOGIN
    )
    assert str(peer(second["broker_username"], second["broker_password"]).connect()) == "Success"
    old_token = {"Authorization": f"Bearer {first['api_token']}"}
    assert secured.api.get("/api/v1/whoami", headers=old_token).status_code == 401
