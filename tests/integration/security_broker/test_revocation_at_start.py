"""A revocation the broker never heard of (its call failed) is applied when the controller starts,
and a revoked device's retained "online" status does not bring it back online."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from controller.db.identity_store import IdentityStore
from controller.db.schema import utcnow
from controller.db.session import make_engine
from controller.server import Controller
from shared.codec import encode
from shared.messages import Status
from shared.topics import Channel
from tests.integration.controller.conftest import poll, start_controller
from tests.integration.security_broker.acl_broker import REFUSED_LOGIN, Peer
from tests.integration.security_broker.conftest import Secured

PeerFactory = Callable[[str | None, str | None], Peer]


def test_a_revocation_stored_but_not_applied_is_applied_at_start(
    secured: Secured, peer: PeerFactory
) -> None:
    identity = secured.enrol("gw-late")
    device = peer(identity["broker_username"], identity["broker_password"])
    assert str(device.connect()) == "Success"
    online = encode(Status(device_id="gw-late", state="online"))
    device.publish(secured.topic("gw-late", Channel.STATUS), online, retain=True)
    poll(
        lambda: secured.api.get("/api/v1/devices/gw-late").json().get("online") is True,
        what="gw-late online",
    )

    # The database says revoked, the broker was never told (as when its call failed).
    settings = secured.controller.settings
    engine = make_engine(settings.db_url)
    try:
        IdentityStore(engine).revoke_identity("gw-late", utcnow())
    finally:
        engine.dispose()
    secured.controller.stop()
    restarted: Controller = start_controller(settings)
    try:
        with httpx.Client(
            base_url=restarted.http_url,
            timeout=30,
            headers={"Authorization": f"Bearer {secured.admin_token}"},
        ) as api:
            if restarted.broker_url != secured.broker_url:
                # The embedded broker restarted with the controller and checks logins against
                # the database: the revoked credential is refused there.
                fresh = Peer(
                    restarted.broker_url, identity["broker_username"], identity["broker_password"]
                )
                try:
                    assert str(fresh.connect()) in REFUSED_LOGIN
                finally:
                    fresh.close()
                return
            # Mosquitto outlived the controller: the credential is deleted at start.
            poll(lambda: device.disconnects, what="the broker to close gw-late's connection")
            again = peer(identity["broker_username"], identity["broker_password"])
            assert str(again.connect()) in REFUSED_LOGIN
            # The retained "online" status arrives again on subscribe: gw-late stays offline.
            poll(
                lambda: api.get("/api/v1/devices/gw-late").json().get("online") is False,
                what="gw-late shown offline after the restart",
            )
    finally:
        restarted.stop()
