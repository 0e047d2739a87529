"""Deployments: change the slots of target devices, bump their generation, publish desired state."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from controller.db.repository import Repository
from controller.db.schema import utcnow
from controller.errors import InvalidInput, NotFound
from controller.fleet.catalog import Catalog
from controller.fleet.config_layers import Layer
from controller.fleet.configs import Configs, version_defaults
from controller.fleet.desired import (
    PlannedSlot,
    SlotPlan,
    desired_document,
    plan_deploy,
    plan_redelegate,
    plan_undeploy,
)
from controller.fleet.fleet_lock import FleetLock
from controller.fleet.publisher import AgentOrders, Publisher
from controller.fleet.selectors import parse_selector
from controller.fleet.warmup_gate import refuse_unknown_warmup
from controller.records import ConfigUpdate, Deployment, VersionRecord
from controller.trust.signing import FleetSigner
from shared.codec import encode
from shared.delegate import DelegateConfig
from shared.jobs import Job
from shared.topics import Channel, Topics

logger = logging.getLogger(__name__)


REPUBLISH_CHUNK = 500
"""Devices per lock hold when every document is published again."""
YIELD_MAX_S = 60.0
"""The longest a republish of every document waits for the rollout loop, in all."""
YIELD_POLL_S = 0.05
LOGGED_ONE_BY_ONE = 20
"""Publications of up to this many documents log a line per device at INFO; larger ones (a
rollout's chunk, a republish) one line, the devices at DEBUG (10,000 INFO lines a rollout)."""


class Fleet:
    """Deploy and undeploy model versions; keep every device's retained desired document."""

    def __init__(
        self,
        repo: Repository,
        catalog: Catalog,
        configs: Configs,
        publisher: Publisher,
        topics: Topics,
        public_url: str,
        clock: Callable[[], datetime] = utcnow,
        signer: FleetSigner | None = None,
        pending_jobs: Callable[[Sequence[str]], Mapping[str, Sequence[Job]]] | None = None,
        agent_orders: AgentOrders | None = None,
    ) -> None:
        self._repo = repo
        self._agent_orders = agent_orders
        """The agent release each device is ordered to run, carried in its document."""
        self._pending_jobs = pending_jobs
        """The unfinished profiling/tuning jobs of devices, carried in their documents."""
        self._signer = signer
        self._catalog = catalog
        self._configs = configs
        self._publisher = publisher
        self._topics = topics
        self._public_url = public_url
        self._clock = clock
        self._lock = FleetLock()

    def deploy(
        self,
        model: str,
        version: str,
        *,
        device: str | None = None,
        selector: str | None = None,
        delegate: DelegateConfig | None = None,
        config: str | None = None,
    ) -> Deployment:
        """Put ``model:version`` in a slot of the target devices (exactly one of ``device`` and
        ``selector``), with ``delegate`` or the named ``config`` (neither: the default).

        With a named config, the config is resolved per device and checked against the model;
        any problem on any device refuses the whole deploy (400 naming the devices). A version
        whose warm-up inputs are unknown is refused (409, :mod:`controller.fleet.warmup_gate`).
        """
        if config is not None and delegate is not None:
            raise InvalidInput("give either a delegate or a named config, not both")
        record = self._catalog.require_version(model, version)
        refuse_unknown_warmup(record)
        with self._lock:
            targets = self._targets(device, selector)
            if config is None:  # an inline delegate gets the default profiles a config would
                inline = delegate or DelegateConfig()
                slot = self._slot(record, version_defaults(inline, record).apply(inline), None)
                plans = {d: _deploying(slot) for d in targets}
            else:
                plans = self._config_plans(config, record, targets)
            return self._apply(plans)

    def _slot(
        self, record: VersionRecord, delegate: DelegateConfig, config: str | None
    ) -> PlannedSlot:
        return PlannedSlot(
            name=record.model,
            version=record.version,
            sha256=record.sha256,
            size=record.size,
            delegate=delegate,
            model_version_id=record.id,
            config=config,
        )

    def _config_plans(self, name: str, record: VersionRecord, targets: list[str]) -> _Plans:
        layers = self._configs.require_layers(name)
        plans: _Plans = {}
        problems: list[str] = []
        bad: set[str] = set()
        for device in self._repo.devices(targets):
            result = Configs.resolve_for(layers, device, record)
            problems += [f"{device.id}: {p}" for p in result.problems]
            bad |= {device.id} if result.problems else set()
            plans[device.id] = _deploying(self._slot(record, result.delegate, name))
        if problems:
            raise InvalidInput(
                f"config '{name}' does not fit {record.model}:{record.version} on "
                f"{_devices_of(bad)}: " + "; ".join(problems)
            )
        return plans

    def undeploy(
        self, model: str, *, device: str | None = None, selector: str | None = None
    ) -> Deployment:
        """Remove the slot of ``model`` from the target devices (one of ``device``/``selector``)."""
        with self._lock:
            targets = self._targets(device, selector)
            return self._apply({d: lambda current: plan_undeploy(current, model) for d in targets})

    def put_config(self, name: str, scope: str, values: dict[str, Any]) -> ConfigUpdate:
        """Store a config layer; re-resolve and republish every slot that uses the config."""
        self._configs.check_name(name)
        scope, values = Configs.parse_layer(scope, values)
        with self._lock:
            layers = Configs.with_layer(self._configs.layers(name), scope, values)
            plans = self._reresolve(name, layers)
            self._configs.put(name, scope, values)
            result = self._apply(plans)
        return ConfigUpdate(self._configs.show_or_none(name), result.devices)

    def delete_config(self, name: str, scope: str | None) -> ConfigUpdate:
        """Delete a layer (or the config); re-resolve and republish the slots that use it."""
        self._configs.check_name(name)
        with self._lock:
            current = self._configs.layers(name)
            plans = self._reresolve(name, Configs.without_layer(current, scope))
            self._configs.delete(name, scope)
            result = self._apply(plans)
        return ConfigUpdate(self._configs.show_or_none(name), result.devices)

    def _reresolve(self, name: str, layers: list[Layer]) -> _Plans:
        devices = self._repo.devices(self._configs.devices_using(name))
        ids = {s.model_version_id for d in devices for s in d.slots if s.config == name}
        versions = self._repo.versions_by_id(sorted(ids))
        plans: _Plans = {}
        problems: list[str] = []
        bad: set[str] = set()
        for device in devices:
            delegates: dict[str, DelegateConfig] = {}
            for slot in device.slots:
                if slot.config != name:
                    continue
                result = Configs.resolve_for(layers, device, versions[slot.model_version_id])
                problems += [f"{device.id} ({slot.name}): {p}" for p in result.problems]
                bad |= {device.id} if result.problems else set()
                delegates[slot.name] = result.delegate
            plans[device.id] = _redelegating(name, delegates)
        if problems:
            raise InvalidInput(
                f"config '{name}' would not fit the slots using it on "
                f"{_devices_of(bad)}: " + "; ".join(problems)
            )
        return plans

    def deploy_to(
        self, device_ids: Sequence[str], model: str, version: str, config: str | None
    ) -> Deployment:
        """Put ``model:version`` (with ``config`` resolved per device) on these devices.

        What a rollout wave does; like :meth:`deploy` with a device list. Devices already
        serving exactly that keep their generation, so publishing again is idempotent.
        """
        deployment, acknowledged = self.send_to(device_ids, model, version, config)
        acknowledged()
        return deployment

    def send_to(
        self, device_ids: Sequence[str], model: str, version: str, config: str | None
    ) -> tuple[Deployment, Callable[[], None]]:
        """:meth:`deploy_to` up to handing the documents to the bus: the returned call waits
        for the broker's acknowledgements (BusError when they do not come). The slots and
        generations are stored before it returns."""
        record = self._catalog.require_version(model, version)
        with self._lock:
            if config is None:
                slot = self._slot(record, DelegateConfig(), None)
                plans = {d: _deploying(slot) for d in device_ids}
            else:
                plans = self._config_plans(config, record, list(device_ids))
            return self._send(plans)

    def restore(self, model: str, previous: Mapping[str, PlannedSlot | None]) -> Deployment:
        """Give each device its previous slot of ``model`` back (None: it had none).

        A rollout's rollback: the stored slot carries the exact version and resolved delegate,
        so the device finds the engine it kept and needs no download and no build.
        """
        plans: _Plans = {}
        for device_id, slot in previous.items():
            if slot is None:
                plans[device_id] = _removing(model)
            else:
                plans[device_id] = _deploying(slot)
        with self._lock:
            return self._apply(plans)

    def republish_all(self, yield_to: Callable[[], bool] | None = None) -> int:
        """Publish every device's current desired document again (same generation).

        A chunk of devices at a time, each read and published under the lock: a deploy or a
        rollout wave arriving meanwhile waits for one chunk, not for the whole fleet (10,000
        documents held it about 10 s, right when a new leader had a wave to publish).

        ``yield_to``: while it answers True (the rollout loop is at work), the next chunk waits,
        for at most :data:`YIELD_MAX_S` in all. A new leader's republish of 10,000 documents
        took 21 s beside the rollout it took over, on the same GIL, and slowed that rollout's
        next wave by half; a rollout publishes and republishes its own devices' documents, so
        the rest can wait for its pauses. Every chunk reads the current documents, so a late
        chunk never publishes an older generation.
        """
        ids = sorted(self._repo.device_labels())
        waited_s = 0.0
        for start in range(0, len(ids), REPUBLISH_CHUNK):
            while yield_to is not None and waited_s < YIELD_MAX_S and yield_to():
                time.sleep(YIELD_POLL_S)
                waited_s += YIELD_POLL_S
            self.republish(ids[start : start + REPUBLISH_CHUNK])
        return len(ids)

    def republish(self, device_ids: Sequence[str]) -> int:
        """Publish these devices' current desired documents again (same generation)."""
        if not device_ids:
            return 0
        with self._lock.background():  # a deploy or a wave waiting goes first (fleet_lock.py)
            documents = self._repo.desired(list(device_ids))
            self._publish_all(documents)
            return len(documents)

    def touch(self, device_id: str) -> Deployment:
        """Publish the device's document under a new generation (its jobs changed)."""
        with self._lock:
            return self._apply({device_id: _touching})

    def send_touched(self, device_ids: Sequence[str]) -> tuple[Deployment, Callable[[], None]]:
        """Store a new generation of these devices' documents and hand them to the bus (their
        agent orders changed); the returned call waits for the broker's acknowledgements."""
        with self._lock:
            return self._send(dict.fromkeys(device_ids, _touching))

    def _apply(self, plans: _Plans) -> Deployment:
        """Run the plans (caller holds the lock); publish to the devices that changed."""
        deployment, acknowledged = self._send(plans)
        acknowledged()
        return deployment

    def _send(self, plans: _Plans) -> tuple[Deployment, Callable[[], None]]:
        """:meth:`_apply` without waiting for the broker's acknowledgements."""
        changes = self._repo.change_each(plans)
        acknowledged = self._send_all(
            [(c.device_id, c.generation, c.slots) for c in changes if c.changed]
        )
        return Deployment(tuple(changes)), acknowledged

    def _targets(self, device: str | None, selector: str | None) -> list[str]:
        if (device is None) == (selector is None):
            raise InvalidInput("give exactly one of device or selector")
        if device is not None:
            self._repo.device(device)
            return [device]
        assert selector is not None
        parsed = parse_selector(selector)
        matched = sorted(
            d for d, labels in self._repo.device_labels().items() if parsed.matches(labels)
        )
        if not matched:
            raise NotFound(f"no device matches selector '{selector}'")
        return matched

    def _publish_all(self, docs: Sequence[tuple[str, int, tuple[PlannedSlot, ...]]]) -> None:
        """Publish each (device, generation, slots) as its retained desired document."""
        self._send_all(docs)()

    def _send_all(
        self, docs: Sequence[tuple[str, int, tuple[PlannedSlot, ...]]]
    ) -> Callable[[], None]:
        """:meth:`_publish_all`; the returned call waits for the acknowledgements."""
        if not docs:
            return _nothing
        refs, calibrating = self._catalog.references_of([s for _, _, ss in docs for s in ss])
        now = self._clock()
        signed = self._signer.documents(docs) if self._signer is not None else {}
        jobs = self._pending_jobs([d for d, _, _ in docs]) if self._pending_jobs else {}
        agents = self._agent_orders([d for d, _, _ in docs]) if self._agent_orders else {}
        documents = [
            desired_document(
                device_id,
                gen,
                slots,
                self._public_url,
                now,
                refs,
                signed.get(device_id),
                jobs=jobs.get(device_id, ()),
                calibrating=calibrating,
                agent=agents.get(device_id),
            )
            for device_id, gen, slots in docs
        ]
        if self._signer is not None:
            documents = self._signer.sign_documents(documents)
        messages = [
            (self._topics.device(d.device_id, Channel.DESIRED), encode(d)) for d in documents
        ]
        sent = self._publisher.send_all(messages, qos=1, retain=True)

        def acknowledged() -> None:
            sent()
            if len(docs) > LOGGED_ONE_BY_ONE:  # a wave's chunk, a republish: one line
                generations = [gen for _, gen, _ in docs]
                logger.info(
                    "published desired documents to %d devices (%s ... %s, generations %d-%d)",
                    len(docs),
                    docs[0][0],
                    docs[-1][0],
                    min(generations),
                    max(generations),
                )
            level = logging.INFO if len(docs) <= LOGGED_ONE_BY_ONE else logging.DEBUG
            for device_id, gen, slots in docs:
                logger.log(
                    level,
                    "published desired generation %d to %s (%d slots)",
                    gen,
                    device_id,
                    len(slots),
                )

        return acknowledged


def _nothing() -> None:
    """Nothing to wait for."""


_Plan = Callable[[tuple[PlannedSlot, ...]], SlotPlan]
_Plans = dict[str, _Plan]


def _deploying(slot: PlannedSlot) -> _Plan:
    return lambda current: plan_deploy(current, slot)


def _touching(current: tuple[PlannedSlot, ...]) -> SlotPlan:
    return SlotPlan(current, changed=True)


def _removing(model: str) -> _Plan:
    return lambda current: plan_undeploy(current, model)


def _redelegating(config: str, delegates: dict[str, DelegateConfig]) -> _Plan:
    return lambda current: plan_redelegate(current, config, delegates)


def _devices_of(ids: set[str]) -> str:
    names = sorted(ids)
    return ("device " if len(names) == 1 else "devices ") + ", ".join(names)
