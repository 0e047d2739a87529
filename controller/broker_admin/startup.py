"""Start the broker side of ``jetfleet serve``: the embedded broker (anonymous, or enforcing
logins and ACLs) or an external one, and the :class:`BrokerAdmin` that matches.

With ``broker_admin = "embedded"`` the controller logs in to its own broker with
``Settings.broker_auth``'s user and password when both are given, else as
``jetfleet-controller`` with a password made up at start and never written anywhere; devices
log in with the credential enrolment gave them (:func:`check_device_login`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from controller.broker_admin.acl import device_of_username
from controller.broker_admin.base import BrokerAdmin, NoBrokerAdmin
from controller.broker_admin.dynsec import DynsecAdmin
from controller.broker_admin.embedded import AccessPolicy, EmbeddedAdmin
from controller.broker_admin.embedded_broker import EmbeddedBroker
from controller.broker_admin.passwords import (
    PasswordHash,
    hash_password,
    new_password,
    verify_password,
)
from controller.db.identity_store import IdentityStore
from controller.errors import ControllerError, InvalidInput
from controller.settings import Settings
from shared.transport import MqttAuth

logger = logging.getLogger(__name__)

EMBEDDED_CONTROLLER_USER = "jetfleet-controller"

PACKET_OVERHEAD_BYTES = 64 * 1024
"""Room for topic, packet id and headers above ``--max-mqtt-payload`` in the broker's packet cap."""


@dataclass
class BrokerSide:
    """The broker URL and credential the controller's bus uses, the admin, and what to stop."""

    broker_url: str
    bus_auth: MqttAuth
    admin: BrokerAdmin
    stoppers: list[Callable[[], None]] = field(default_factory=list)


def start_broker_side(settings: Settings, identities: IdentityStore) -> BrokerSide:
    """Start the embedded broker when no external one is given; pick the admin adapter."""
    s = settings
    if s.broker_url is None:
        if s.broker_admin == "dynsec":
            raise InvalidInput("--broker-admin dynsec needs an external Mosquitto: give --broker")
        policy = None
        auth = s.broker_auth
        if s.broker_admin == "embedded":
            user, password = auth.username, auth.password
            if user is None or password is None:
                user, password = EMBEDDED_CONTROLLER_USER, new_password()
                auth = dataclasses.replace(auth, username=user, password=password)
            policy = AccessPolicy(
                s.topic_prefix, user, password, partial(check_device_login, identities)
            )
        broker = EmbeddedBroker(
            s.embedded_broker_host,
            s.embedded_broker_port,
            policy=policy,
            max_packet_bytes=s.max_mqtt_payload_bytes + PACKET_OVERHEAD_BYTES,
        )
        broker.start()
        admin: BrokerAdmin = NoBrokerAdmin() if policy is None else EmbeddedAdmin(broker.disconnect)
        return BrokerSide(broker.url, auth, admin, [broker.stop])
    if s.broker_admin == "embedded":
        raise InvalidInput(
            "--broker-admin embedded is for the embedded broker: leave out --broker, or use "
            "--broker-admin dynsec with Mosquitto"
        )
    if s.broker_admin == "none":
        return BrokerSide(s.broker_url, s.broker_auth, NoBrokerAdmin())
    if s.broker_auth.username is None:
        raise InvalidInput(
            "--broker-admin dynsec needs the controller's broker user: give --broker-user and "
            "--broker-password-file (`jetfleet broker config` writes both)"
        )
    dynsec = DynsecAdmin(s.broker_url, s.broker_auth, s.topic_prefix)
    side = BrokerSide(s.broker_url, s.broker_auth, dynsec, [dynsec.stop])
    try:
        dynsec.ping()
    except BaseException:
        dynsec.stop()
        raise
    return side


def bind_client_ids(admin: BrokerAdmin, identities: IdentityStore) -> int:
    """Bind every enrolled, unrevoked device's broker credential to its agent client id.

    Credentials created before client ids were bound could log in with any id and so
    take over another gateway's session; this runs at every start and is idempotent. A broker
    error is logged, not raised: the controller still starts.
    """
    if not admin.manages_credentials:
        return 0
    active = [
        (i.device_id, i.broker_username) for i in identities.identities() if i.revoked_at is None
    ]
    try:
        admin.bind_client_ids(active)
    except ControllerError as exc:
        logger.error("could not bind broker client ids of %d device(s): %s", len(active), exc)
        return 0
    return len(active)


_UNKNOWN_USER = hash_password(new_password())
"""What a login of a user name with no usable credential is checked against (never matches)."""


def check_device_login(store: IdentityStore, username: str, password: str) -> bool:
    """True when ``username``/``password`` is an enrolled, unrevoked device credential (the
    embedded broker asks this at every login; :mod:`controller.trust.enrolment` stores it)."""
    device_id = device_of_username(username)
    identity = None if device_id is None else store.identity(device_id)
    stored = None
    if (
        identity is not None
        and identity.revoked_at is None
        and identity.broker_password_hash is not None
        and identity.broker_username == username
    ):
        try:
            stored = PasswordHash.decode(identity.broker_password_hash)
        except ValueError:
            stored = None
    # Unknown, revoked and valid user names cost the same hash: the answer's time tells no one
    # which device ids exist.
    matched = verify_password(password, stored or _UNKNOWN_USER)
    return stored is not None and matched
