"""Deployments: change the slots of target devices, bump their generation, publish desired state."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from controller.api.schemas import (
    DeploymentResult,
    DeployRequest,
    DeviceChange,
    UndeployRequest,
)
from controller.catalog import Catalog
from controller.db.repository import Repository
from controller.db.schema import utcnow
from controller.desired import (
    PlannedSlot,
    SlotPlan,
    desired_document,
    plan_deploy,
    plan_undeploy,
)
from controller.errors import InvalidInput, NotFound
from controller.selectors import parse_selector
from shared.codec import encode
from shared.delegate import DelegateConfig
from shared.topics import Channel, Topics

logger = logging.getLogger(__name__)


class Publisher(Protocol):
    """Publishes one MQTT message (the bus)."""

    def publish(self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = True) -> None:
        """Publish and wait for the broker's acknowledgement."""


class Fleet:
    """Deploy and undeploy model versions; keep every device's retained desired document."""

    def __init__(
        self,
        repo: Repository,
        catalog: Catalog,
        publisher: Publisher,
        topics: Topics,
        public_url: str,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._repo = repo
        self._catalog = catalog
        self._publisher = publisher
        self._topics = topics
        self._public_url = public_url
        self._clock = clock
        self._lock = threading.Lock()

    def deploy(self, request: DeployRequest) -> DeploymentResult:
        """Put ``model:version`` in a slot of the target devices."""
        record = self._catalog.require_version(request.model, request.version)
        slot = PlannedSlot(
            name=record.model,
            version=record.version,
            sha256=record.sha256,
            size=record.size,
            delegate=request.delegate or DelegateConfig(),
            model_version_id=record.id,
        )
        return self._change(
            request.device, request.selector, lambda current: plan_deploy(current, slot)
        )

    def undeploy(self, request: UndeployRequest) -> DeploymentResult:
        """Remove the slot of ``model`` from the target devices."""
        model = request.model
        return self._change(
            request.device, request.selector, lambda current: plan_undeploy(current, model)
        )

    def republish_all(self) -> int:
        """Publish every device's current desired document again (same generation)."""
        with self._lock:
            devices = self._repo.devices()
            for device in devices:
                self._publish(device.id, device.desired_generation, device.slots)
            return len(devices)

    def _change(
        self,
        device: str | None,
        selector: str | None,
        plan: Callable[[tuple[PlannedSlot, ...]], SlotPlan],
    ) -> DeploymentResult:
        with self._lock:
            targets = self._targets(device, selector)
            changes = self._repo.change_slots(targets, plan)
            for change in changes:
                if change.changed:
                    self._publish(change.device_id, change.generation, change.slots)
        return DeploymentResult(
            devices=[
                DeviceChange(device_id=c.device_id, generation=c.generation, changed=c.changed)
                for c in changes
            ]
        )

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

    def _publish(self, device_id: str, generation: int, slots: tuple[PlannedSlot, ...]) -> None:
        doc = desired_document(device_id, generation, slots, self._public_url, self._clock())
        self._publisher.publish(
            self._topics.device(device_id, Channel.DESIRED), encode(doc), qos=1, retain=True
        )
        logger.info(
            "published desired generation %d to %s (%d slots)", generation, device_id, len(slots)
        )
