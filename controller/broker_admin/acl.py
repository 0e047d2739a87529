"""The broker ACL as pure decisions: one source for the embedded broker and for Mosquitto.

A device may publish only to ``<prefix>/<its id>/{reported,telemetry,events,status}`` (its Last
Will goes to its own ``status``) and subscribe only to ``<prefix>/<its id>/desired``. The
controller subscribes to those four channels of every device (its ingest worker processes to
telemetry through the shared subscription :func:`ingest_share_filter`) and publishes ``desired``.
:func:`device_acls` and :func:`controller_acls` spell the same rules as Mosquitto dynamic
security ACL entries.
"""

from __future__ import annotations

from typing import Any

from shared.topics import AGENT_PUBLISHES, Channel, TopicError, Topics
from shared.transport import AGENT_CLIENT_ID_PREFIX, agent_client_id

DEVICE_USERNAME_PREFIX = "dev-"
"""Broker user names of devices are ``dev-<device id>``, so none can collide with the
controller's own user name (which must not start with it)."""

DYNSEC_TOPIC = "$CONTROL/dynamic-security/v1"
DYNSEC_RESPONSE_TOPIC = f"{DYNSEC_TOPIC}/response"

CONTROLLER_ROLE = "jetfleet-controller"
"""Dynamic security role of the controller's client: ingest, desired state, admin."""

INGEST_SHARE_GROUP = "jetfleet-ingest"
"""MQTT shared-subscription group of the controller's ingest worker processes."""

SHARED_DEVICE_ROLE = "jetfleet-device"
"""Role every device client holds besides its own: explicit denials of the admin topics."""

SHARED_DEVICE_ACLS: list[dict[str, Any]] = [
    {"acltype": "publishClientSend", "topic": "$CONTROL/#", "priority": 10, "allow": False},
    {"acltype": "subscribePattern", "topic": "$CONTROL/#", "priority": 10, "allow": False},
    {"acltype": "subscribePattern", "topic": "$SYS/#", "priority": 10, "allow": False},
]


def device_username(device_id: str) -> str:
    """The broker user name of ``device_id``."""
    return DEVICE_USERNAME_PREFIX + device_id


def device_of_username(username: str) -> str | None:
    """The device id a broker user name stands for; None when it is not a device's."""
    if not username.startswith(DEVICE_USERNAME_PREFIX):
        return None
    device_id = username[len(DEVICE_USERNAME_PREFIX) :]
    try:
        Topics().device(device_id, Channel.STATUS)
    except TopicError:
        return None
    return device_id


def client_id_allowed(device_id: str | None, client_id: str) -> bool:
    """May a client log in with ``client_id``: a device (``device_id``) only with its own agent
    client id, the controller (``None``) with any id outside the agents' namespace.

    MQTT lets a new connection with a client id take over (or, with a clean session, erase)
    the session of that id, so an id usable by anyone else is a way to cut a gateway off.
    Mosquitto enforces the device half through dynamic security's per-client ``clientid``.
    """
    if device_id is None:
        return not client_id.startswith(AGENT_CLIENT_ID_PREFIX)
    return client_id == agent_client_id(device_id)


def device_role(device_id: str) -> str:
    """The name of the dynamic security role holding one device's ACLs."""
    return f"jetfleet-device-{device_id}"


def _own_topics(device_id: str, prefix: str) -> tuple[set[str], str] | None:
    try:
        topics = Topics(prefix)
        publish = {topics.device(device_id, channel) for channel in AGENT_PUBLISHES}
        return publish, topics.device(device_id, Channel.DESIRED)
    except TopicError:
        return None


def device_may_publish(device_id: str, topic: str, prefix: str) -> bool:
    """True when ``device_id`` may publish (or set its Last Will) on ``topic``."""
    own = _own_topics(device_id, prefix)
    return own is not None and topic in own[0]


def device_may_subscribe(device_id: str, topic_filter: str, prefix: str) -> bool:
    """True when ``device_id`` may subscribe to ``topic_filter`` (its own desired state only)."""
    own = _own_topics(device_id, prefix)
    return own is not None and topic_filter == own[1]


def device_may_receive(device_id: str, topic: str, prefix: str) -> bool:
    """True when a message on ``topic`` may be delivered to ``device_id``."""
    return device_may_subscribe(device_id, topic, prefix)


def controller_may_publish(topic: str, prefix: str) -> bool:
    """The controller publishes desired documents, one topic per device."""
    parsed = Topics(prefix).parse(topic)
    return parsed is not None and parsed[1] is Channel.DESIRED


def ingest_share_filter(prefix: str) -> str:
    """The shared subscription ingest workers split every device's telemetry through."""
    return f"$share/{INGEST_SHARE_GROUP}/{Topics(prefix).every_device(Channel.TELEMETRY)}"


def controller_may_subscribe(topic_filter: str, prefix: str) -> bool:
    """The controller subscribes to what agents publish, for every device or for one."""
    topics = Topics(prefix)
    if topic_filter in {topics.every_device(channel) for channel in AGENT_PUBLISHES}:
        return True
    parsed = topics.parse(topic_filter)
    return parsed is not None and parsed[1] in AGENT_PUBLISHES


def controller_may_receive(topic: str, prefix: str) -> bool:
    """A message on ``topic`` may be delivered to the controller."""
    parsed = Topics(prefix).parse(topic)
    return parsed is not None and parsed[1] in AGENT_PUBLISHES


def _acl(acltype: str, topic: str, allow: bool = True) -> dict[str, Any]:
    return {"acltype": acltype, "topic": topic, "priority": 0, "allow": allow}


def device_acls(device_id: str, prefix: str) -> list[dict[str, Any]]:
    """Dynamic security ACL entries of one device's role (literal topics: Mosquitto 2.0's
    dynamic security has no ``%u`` substitution)."""
    own = _own_topics(device_id, prefix)
    if own is None:
        raise TopicError(f"invalid device id {device_id!r} or prefix {prefix!r}")
    publish, desired = own
    acls = [_acl("publishClientSend", topic) for topic in sorted(publish)]
    acls.append(_acl("subscribeLiteral", desired))
    acls.append(_acl("publishClientReceive", desired))
    acls.append(_acl("unsubscribeLiteral", desired))
    return acls


def controller_acls(prefix: str) -> list[dict[str, Any]]:
    """ACL entries of the controller's role: ingest, desired state, dynamic security admin."""
    topics = Topics(prefix)
    acls: list[dict[str, Any]] = []
    for channel in AGENT_PUBLISHES:
        every = topics.every_device(channel)
        acls += [
            _acl("subscribeLiteral", every),
            _acl("publishClientReceive", every),
            _acl("unsubscribeLiteral", every),
        ]
    share = ingest_share_filter(prefix)
    acls += [_acl("subscribeLiteral", share), _acl("unsubscribeLiteral", share)]
    acls.append(_acl("publishClientSend", topics.every_device(Channel.DESIRED)))
    acls += [
        _acl("publishClientSend", DYNSEC_TOPIC),
        _acl("subscribeLiteral", DYNSEC_RESPONSE_TOPIC),
        _acl("publishClientReceive", DYNSEC_RESPONSE_TOPIC),
        _acl("unsubscribeLiteral", DYNSEC_RESPONSE_TOPIC),
    ]
    return acls
