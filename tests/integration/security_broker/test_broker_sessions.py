"""What a client can do to other clients' sessions and retained messages, on Mosquitto with dynamic
security and on the embedded broker alike.

- A device receives at CONNECT only retained messages its own subscriptions and its ACL allow
  (amqtt sent every retained message matching anybody's live subscription).
- A refused CONNECT touches no session: an anonymous client, a wrong password or another
  device's credential using a gateway's client id neither erases its subscriptions
  (clean session) nor disconnects it (persistent session).
- A device's credential works only with its own agent client id.
- Packets over the broker's size cap are refused and never retained or fanned out.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from shared.topics import Channel
from shared.transport import agent_client_id
from tests.integration.controller.conftest import poll
from tests.integration.security_broker.acl_broker import REFUSED_LOGIN, Peer
from tests.integration.security_broker.conftest import Secured

SETTLE_S = 1.0
"""How long a refused message gets to show up after a later control message did arrive."""

PeerFactory = Callable[..., Peer]


def _device(secured: Secured, peer: PeerFactory, device_id: str) -> tuple[Peer, dict[str, str]]:
    identity = secured.enrol(device_id)
    p = peer(identity["broker_username"], identity["broker_password"])
    assert str(p.connect()) == "Success"
    return p, identity


def _controller(secured: Secured, peer: PeerFactory) -> Peer:
    c = peer(secured.controller_user, secured.controller_password)
    assert str(c.connect()) == "Success"
    return c


def test_a_device_receives_no_other_devices_retained_messages_at_connect(
    secured: Secured, peer: PeerFactory
) -> None:
    controller = _controller(secured, peer)
    for channel in (Channel.REPORTED, Channel.STATUS):
        assert not controller.subscribe(secured.topics.every_device(channel)).is_failure
    victim, _ = _device(secured, peer, "gw-victim")
    victim_desired = secured.topic("gw-victim", Channel.DESIRED)
    assert not victim.subscribe(victim_desired).is_failure
    controller.publish(victim_desired, b"signed desired of gw-victim", retain=True)
    victim.publish(secured.topic("gw-victim", Channel.REPORTED), b"facts of gw-victim", True)
    victim.publish(secured.topic("gw-victim", Channel.STATUS), b"status of gw-victim", True)
    poll(lambda: victim.got(victim_desired), what="gw-victim's own desired document")
    poll(
        lambda: controller.got(secured.topic("gw-victim", Channel.STATUS)),
        what="gw-victim's status at the controller",
    )

    spy, _ = _device(secured, peer, "gw-spy")  # subscribes to nothing
    spy_desired = secured.topic("gw-spy", Channel.DESIRED)
    assert not spy.subscribe(spy_desired).is_failure
    controller.publish(spy_desired, b"for gw-spy", retain=True)
    poll(lambda: spy.got(spy_desired), what="gw-spy's own desired document")
    time.sleep(SETTLE_S)
    assert [t for t, _ in spy.messages if t != spy_desired] == []


def test_a_refused_connect_with_a_gateways_client_id_leaves_its_session_alone(
    secured: Secured, peer: PeerFactory
) -> None:
    victim, identity = _device(secured, peer, "gw-victim")
    other, other_identity = _device(secured, peer, "gw-other")
    desired = secured.topic("gw-victim", Channel.DESIRED)
    assert not victim.subscribe(desired).is_failure
    controller = _controller(secured, peer)
    victim_id = agent_client_id("gw-victim")

    attempts = [
        (None, None),
        (identity["broker_username"], "not-the-password"),
        ("dev-gw-unknown", "whatever"),
        (other_identity["broker_username"], other_identity["broker_password"]),
    ]
    for clean in (True, False):
        for username, password in attempts:
            attacker = peer(username, password, client_id=victim_id, clean_session=clean)
            answer = str(attacker.connect())
            assert answer in REFUSED_LOGIN, (username, clean, answer)
            attacker.close()

    for n in range(3):
        controller.publish(desired, f"desired {n}".encode())
        poll(lambda n=n: f"desired {n}".encode() in victim.got(desired), what=f"desired {n}")
    assert victim.disconnects == []
    assert other.disconnects == []


def test_a_device_credential_works_only_with_its_own_client_id(
    secured: Secured, peer: PeerFactory
) -> None:
    identity = secured.enrol("gw-a")
    user, password = identity["broker_username"], identity["broker_password"]
    for client_id in (agent_client_id("gw-b"), "jetfleet-controller-0123456789ab", "anything"):
        assert str(peer(user, password, client_id=client_id).connect()) in REFUSED_LOGIN
    assert str(peer(user, password, client_id=agent_client_id("gw-a")).connect()) == "Success"


def test_a_packet_over_the_cap_is_refused_and_not_retained(
    secured: Secured, peer: PeerFactory
) -> None:
    controller = _controller(secured, peer)
    status = secured.topic("gw-big", Channel.STATUS)
    every_status = secured.topics.every_device(Channel.STATUS)
    assert not controller.subscribe(every_status).is_failure
    device, identity = _device(secured, peer, "gw-big")

    info = device.client.publish(status, b"x" * (2 * 1024 * 1024), qos=1, retain=True)
    poll(lambda: device.disconnects, what="the broker to drop gw-big's connection")
    assert not info.is_published()

    again = peer(identity["broker_username"], identity["broker_password"])
    assert str(again.connect()) == "Success"
    again.publish(status, b"small", retain=True)
    poll(lambda: controller.got(status), what="gw-big's small status")
    late = _controller(secured, peer)
    assert not late.subscribe(every_status).is_failure
    poll(lambda: late.got(status), what="the retained status")
    time.sleep(SETTLE_S)
    assert [len(p) for p in controller.got(status)] == [5]
    assert late.got(status) == [b"small"]


@pytest.mark.parametrize("clean", [True, False])
def test_a_gateway_reconnecting_with_its_own_credential_takes_its_session_over(
    secured: Secured, peer: PeerFactory, clean: bool
) -> None:
    """The control case: the legitimate owner of a client id may still take it over."""
    first, identity = _device(secured, peer, "gw-own")
    again = peer(identity["broker_username"], identity["broker_password"], clean_session=clean)
    assert str(again.connect()) == "Success"
    poll(lambda: first.disconnects, what="the older connection of gw-own to be replaced")
