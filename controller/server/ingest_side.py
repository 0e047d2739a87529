"""Device messages in, desired documents out (:mod:`controller.server`): the broker and the links.

:func:`start_ingest` starts the batched telemetry writer and the handlers that feed it;
:func:`connect_broker` starts the broker side (the embedded broker, or the admin of an external
one), the inbox, the telemetry link or the ingest worker processes, and makes the two paho buses
(started once the services they serve exist).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from controller.broker_admin.startup import BrokerSide, start_broker_side
from controller.db.telemetry_store import Retention
from controller.ingest.batch import IngestBatcher
from controller.ingest.handlers import Ingest
from controller.ingest.inbox import Inbox
from controller.ingest.pool import (
    IngestWorkers,
    main_subscriptions,
    reports_follow_the_lease,
    start_ingest_workers,
    telemetry_link,
)
from controller.mqtt_bus import MQTT5, MQTT311, MqttBus
from controller.server.storage import Stores
from controller.settings import Settings
from shared.topics import Topics


@dataclass(frozen=True)
class IngestSide:
    """The batched telemetry writer and the handlers that feed it."""

    batcher: IngestBatcher
    ingest: Ingest


def start_ingest(
    s: Settings, stores: Stores, topics: Topics, stoppers: list[Callable[[], None]]
) -> IngestSide:
    """Start the telemetry writer (stopped by ``stoppers``); the handlers over it."""
    retention = Retention(raw_s=s.retention_raw_s, rollup_s=s.retention_rollup_s)
    batcher = IngestBatcher(stores.telemetry, retention=retention)
    batcher.start()
    stoppers.append(batcher.stop)
    ingest = Ingest(
        stores.repo,
        topics,
        batcher=batcher,
        max_payload_bytes=s.max_mqtt_payload_bytes,
        revoked=stores.identities.revoked_among,
    )
    return IngestSide(batcher, ingest)


@dataclass(frozen=True)
class BrokerLinks:
    """The broker side and the controller's connections to it."""

    side: BrokerSide
    workers: IngestWorkers | None
    """Telemetry ingest processes (``Settings.ingest_workers`` > 0), else None."""
    bus: MqttBus
    """Desired documents out (not started)."""
    inbound: MqttBus
    """What agents publish, but telemetry, in (not started)."""
    reports_follow_lease: bool
    """Reported state is stored by the rollout leader alone (see ``reports_follow_the_lease``)."""


def connect_broker(
    s: Settings,
    stores: Stores,
    topics: Topics,
    ingest: IngestSide,
    on_connected: Callable[[], None],
    stoppers: list[Callable[[], None]],
) -> BrokerLinks:
    """Start the broker side and telemetry ingest; the buses, ``on_connected`` after each
    (re)connect of the outgoing one. What starts is stopped by ``stoppers``."""
    broker_side = start_broker_side(s, stores.identities)
    stoppers.extend(broker_side.stoppers)
    broker_url = broker_side.broker_url
    handlers = ingest.ingest
    inbox = Inbox(handlers.handle, admit=handlers.admit, handle_many=handlers.handle_many)
    inbox.start()
    stoppers.append(inbox.stop)
    workers = start_ingest_workers(s, broker_url, broker_side.bus_auth, handlers, ingest.batcher)
    if workers is not None:
        stoppers.append(workers.stop)
    else:
        link = telemetry_link(topics, broker_url, broker_side.bus_auth, handlers, s)
        link.start()
        stoppers.append(link.stop)
    reports_follow_lease = reports_follow_the_lease(s)
    # Two connections: desired documents go out over 3.1.1 (a wide publish window), what
    # agents publish comes in over 5.0 where the broker speaks it (a receive maximum: a
    # burst of reports waits in the socket, not in the broker's droppable queue). The
    # embedded broker is 3.1.1 only. See controller.mqtt_bus.
    bus = MqttBus(
        broker_url,
        topics,
        lambda _topic, _payload: None,
        on_connected=on_connected,
        auth=broker_side.bus_auth,
        subscriptions=[],
    )
    inbound = MqttBus(
        broker_url,
        topics,
        inbox.put,
        auth=broker_side.bus_auth,
        subscriptions=main_subscriptions(topics, reported=not reports_follow_lease),
        client_name="jetfleet-controller-in",
        protocol=MQTT311 if s.broker_url is None else MQTT5,
    )
    return BrokerLinks(broker_side, workers, bus, inbound, reports_follow_lease)
