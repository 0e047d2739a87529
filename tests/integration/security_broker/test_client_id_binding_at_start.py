"""Mosquitto credentials made before client ids were bound are bound to their
agent's client id when the controller starts, so an older fleet is closed too."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from controller.broker_admin.dynsec import DynsecAdmin
from controller.server import Controller
from shared.topics import Channel
from shared.transport import MqttAuth, agent_client_id
from tests.integration.controller.conftest import start_controller
from tests.integration.security_broker.acl_broker import REFUSED_LOGIN, Peer
from tests.integration.security_broker.conftest import Secured

PeerFactory = Callable[..., Peer]


@pytest.mark.parametrize("secured", ["mosquitto"], indirect=True)
def test_an_unbound_credential_is_bound_at_controller_start(
    secured: Secured, peer: PeerFactory
) -> None:
    identity = secured.enrol("gw-old")
    user, password = identity["broker_username"], identity["broker_password"]
    admin = DynsecAdmin(
        secured.broker_url,
        MqttAuth(secured.controller_user, secured.controller_password),
        secured.topics.prefix,
    )
    try:  # what a controller before client-id binding created: no clientid on the client
        admin._run([{"command": "setClientId", "username": user, "clientid": ""}])
    finally:
        admin.stop()
    assert str(peer(user, password, client_id="jftest-unbound").connect()) == "Success"

    settings = secured.controller.settings
    secured.controller.stop()
    restarted: Controller = start_controller(settings)
    try:
        assert str(peer(user, password, client_id="jftest-after").connect()) in REFUSED_LOGIN
        assert str(peer(user, password, client_id=agent_client_id("gw-old")).connect()) == (
            "Success"
        )
    finally:
        restarted.stop()


@pytest.mark.parametrize("secured", ["mosquitto"], indirect=True)
def test_a_connected_device_stays_connected_when_a_controller_starts(
    secured: Secured, peer: PeerFactory
) -> None:
    """Binding at start leaves credentials that already carry their id alone: Mosquitto
    disconnects a client at every ``setClientId``, so setting each id again at every start
    (each replica's) disconnected the whole fleet (found at 10,000 devices)."""
    identity = secured.enrol("gw-live")
    gateway = peer(identity["broker_username"], identity["broker_password"])
    assert str(gateway.connect()) == "Success"

    settings = secured.controller.settings
    secured.controller.stop()
    restarted: Controller = start_controller(settings)
    try:
        gateway.publish(secured.topic("gw-live", Channel.STATUS), b"{}")
        assert gateway.disconnects == []
    finally:
        restarted.stop()
