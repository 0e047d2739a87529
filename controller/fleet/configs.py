"""Named delegate configs: store layers, show them, and resolve them for a device and model.

Resolution is :mod:`controller.fleet.config_layers` (pure) fed with the device's labels and hardware
class; a dynamic input the result has no shape profile for gets the default one from the shapes
the version was pushed with (:mod:`shared.default_profile`, provenance saying so); the result is
checked with :func:`shared.delegate.check_config` against the model's inputs, its Q/DQ nodes,
whether the operator gave its reference inputs (INT8 calibrates from those on the device) and the
device's DLA count, so a wrong config is refused before any device builds.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from controller.db.config_store import ConfigStore
from controller.db.repository import Repository
from controller.errors import InvalidInput, NotFound
from controller.fleet.catalog import Catalog
from controller.fleet.config_layers import Layer, parse_scope, resolve, validate_values
from controller.records import (
    ConfigLayerRecord,
    DeviceRecord,
    NamedConfig,
    ResolvedConfig,
    VersionRecord,
)
from shared.default_profile import DefaultProfiles, default_profiles
from shared.delegate import DelegateConfig, check_config
from shared.facts import DeviceFacts
from shared.hardware_class import hardware_class
from shared.warmup_inputs import WarmupSpec
from shared.wire_model import MODEL_NAME_PATTERN

_NAME = re.compile(MODEL_NAME_PATTERN)


@dataclass(frozen=True)
class Resolution:
    """A config resolved for one device and model version, with what check_config found."""

    delegate: DelegateConfig
    provenance: dict[str, str]
    problems: list[str]
    hardware_class: str | None


def device_hardware_class(facts: DeviceFacts | None) -> str | None:
    """The hardware class of a device's reported facts; None before any facts arrived (or
    when the stored ones are unreadable)."""
    return hardware_class(facts) if facts is not None else None


def _dla_cores(facts: DeviceFacts | None) -> int | None:
    jetson = facts.jetson if facts is not None else None
    return jetson.dla_cores if jetson is not None else None


class Configs:
    """Layers of named configs and their resolution."""

    def __init__(self, store: ConfigStore, repo: Repository, catalog: Catalog) -> None:
        self._store = store
        self._repo = repo
        self._catalog = catalog

    @staticmethod
    def check_name(name: str) -> None:
        """Refuse a config name that is not like a model name."""
        if not _NAME.fullmatch(name):
            raise InvalidInput(
                f"invalid config name {name!r}: use 1-64 of a-z 0-9 . _ - starting with a-z or 0-9"
            )

    @staticmethod
    def parse_layer(scope: str, values: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The canonical scope text and validated values of a layer (400 naming what is wrong)."""
        return str(parse_scope(scope)), validate_values(values)

    def layers(self, name: str) -> list[Layer]:
        """The layers of config ``name`` (empty when there is none)."""
        return [_layer(r) for r in self._store.layers(name)]

    def require_layers(self, name: str) -> list[Layer]:
        """The layers of config ``name``, or :class:`NotFound` naming the fix."""
        self.check_name(name)
        layers = self.layers(name)
        if not layers:
            raise NotFound(f"unknown config '{name}': create it with `jetfleet configs set {name}`")
        return layers

    @staticmethod
    def with_layer(layers: Sequence[Layer], scope: str, values: dict[str, Any]) -> list[Layer]:
        """``layers`` after putting ``values`` at ``scope`` (a new layer goes last)."""
        parsed = parse_scope(scope)
        current = next((layer for layer in layers if str(layer.scope) == str(parsed)), None)
        order = current.order if current is not None else sys.maxsize
        kept = [layer for layer in layers if str(layer.scope) != str(parsed)]
        return [*kept, Layer(parsed, values, order)]

    @staticmethod
    def without_layer(layers: Sequence[Layer], scope: str | None) -> list[Layer]:
        """``layers`` after deleting ``scope`` (every layer when None)."""
        if scope is None:
            return []
        parsed = str(parse_scope(scope))
        return [layer for layer in layers if str(layer.scope) != parsed]

    def devices_using(self, name: str) -> list[str]:
        """Ids of the devices with a slot that resolves config ``name``."""
        return self._store.devices_using_config(name)

    def put(self, name: str, scope: str, values: dict[str, Any]) -> None:
        """Store one layer (already validated with :meth:`parse_layer`)."""
        self._store.put_layer(name, scope, values)

    def delete(self, name: str, scope: str | None) -> None:
        """Delete one layer, or the whole config when ``scope`` is None."""
        self._store.delete(name, None if scope is None else str(parse_scope(scope)))

    def show(self, name: str) -> NamedConfig:
        """One config with its layers, or :class:`NotFound`."""
        self.check_name(name)
        found = self._store.layers(name)
        if not found:
            raise NotFound(f"unknown config '{name}': create it with `jetfleet configs set {name}`")
        return NamedConfig(name, tuple(found))

    def show_or_none(self, name: str) -> NamedConfig | None:
        """One config with its layers, or None when it has none left."""
        found = self._store.layers(name)
        return NamedConfig(name, tuple(found)) if found else None

    def all(self) -> list[NamedConfig]:
        """Every config, by name."""
        grouped: dict[str, list[ConfigLayerRecord]] = {}
        for record in self._store.layers():
            grouped.setdefault(record.name, []).append(record)
        return [NamedConfig(name, tuple(records)) for name, records in grouped.items()]

    @staticmethod
    def resolve_for(
        layers: Sequence[Layer], device: DeviceRecord, version: VersionRecord
    ) -> Resolution:
        """Resolve ``layers`` for ``device`` and check the result against ``version``."""
        hw_class = device_hardware_class(device.device_facts)
        delegate, provenance = resolve(layers, device.id, device.labels, hw_class)
        inputs = {str(t["name"]): list(t["shape"]) for t in version.inputs}
        defaults = version_defaults(delegate, version)
        if defaults.profiles:
            own = provenance["shapes"] if delegate.shapes else None
            delegate = defaults.apply(delegate)
            provenance["shapes"] = provenance["default_shapes"] = defaults.provenance(own)
        problems = check_config(
            delegate,
            inputs,
            has_qdq=version.has_qdq,
            has_samples=bool(version.reference_shapes),  # the operator's inputs, not random
            dla_cores=_dla_cores(device.device_facts),
            device_class=hw_class or f"device {device.id}",
            no_default=defaults.unusable,
        )
        return Resolution(delegate, provenance, problems, hw_class)

    def resolve(self, name: str | None, device_id: str, model_ref: str) -> ResolvedConfig:
        """The effective config of ``model_ref`` (N or N:V) on ``device_id`` under ``name``.

        Without a version, the version deployed on the device (else the newest) is used. Without
        a name, the config the device's slot names is used (else the fleet-wide default).
        """
        device = self._repo.device(device_id)
        model, _, version = model_ref.partition(":")
        slot = next((s for s in device.slots if s.name == model), None)
        record = self._version(model, version or (slot.version if slot else None))
        if name is not None:
            layers = self.require_layers(name)
        elif slot is not None and slot.config is not None:
            name = slot.config
            layers = self.layers(name)
        else:
            layers = []
        result = self.resolve_for(layers, device, record)
        return ResolvedConfig(
            config=name,
            device_id=device.id,
            model=record.model,
            version=record.version,
            hardware_class=result.hardware_class,
            delegate=result.delegate,
            provenance=result.provenance,
            problems=result.problems,
        )

    def _version(self, model: str, version: str | None) -> VersionRecord:
        if version:
            return self._catalog.require_version(model, version)
        versions = self._repo.models(model).get(model)
        if not versions:
            raise NotFound(f"unknown model '{model}'")
        return versions[-1]


def version_defaults(delegate: DelegateConfig, version: VersionRecord) -> DefaultProfiles:
    """The default shape profiles of ``version`` under ``delegate`` (shared.default_profile):
    from the shapes it was pushed with, for the dynamic inputs ``delegate`` has none for."""
    return default_profiles(
        {str(t["name"]): list(t["shape"]) for t in version.inputs},
        delegate,
        given=WarmupSpec.from_json(version.warmup_given).shapes,
        reference=version.reference_shapes,
    )


def _layer(record: ConfigLayerRecord) -> Layer:
    return Layer(parse_scope(record.scope), record.values, record.order)
