"""What the controller's services answer beyond stored rows: model versions with their download
URL, named and resolved configs, deployment outcomes, ingest counts, document signatures.

Services (:mod:`controller.fleet`, :mod:`controller.ingest`, :mod:`controller.trust`) take and
return these; the HTTP API turns them into its response bodies at its edge
(:mod:`controller.api.convert`), so no service builds an API schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.records.catalog import ConfigLayerRecord, VersionRecord
from controller.records.fleet import SlotChange
from shared.delegate import DelegateConfig
from shared.manifests import KeyEndorsement, RollbackAuthorization, SignedManifest


@dataclass(frozen=True)
class TensorInfo:
    """One input or output of an ONNX model: its KServe v2 datatype (e.g. FP32) and its dims
    (an int, or a name for a dynamic dim)."""

    name: str
    datatype: str
    shape: tuple[int | str, ...]

    def as_json(self) -> dict[str, Any]:
        """The form a version's ``inputs``/``outputs`` are stored and served in."""
        return {"name": self.name, "datatype": self.datatype, "shape": list(self.shape)}


@dataclass(frozen=True)
class VersionView:
    """A stored model version and the URL devices download it from (what a push, a list and a
    show answer)."""

    record: VersionRecord
    download_url: str


@dataclass(frozen=True)
class NamedConfig:
    """A named delegate config and its layers, in creation order."""

    name: str
    layers: tuple[ConfigLayerRecord, ...]


@dataclass(frozen=True)
class ResolvedConfig:
    """The effective delegate config of one model version on one device."""

    config: str | None
    """The named config (None: the fleet-wide default)."""
    device_id: str
    model: str
    version: str
    hardware_class: str | None
    delegate: DelegateConfig
    provenance: dict[str, str]
    """Per field: the scope that set it (default, class=..., selector=..., device=...)."""
    problems: list[str]
    """What ``check_config`` says to fix before a build."""


@dataclass(frozen=True)
class Deployment:
    """The devices a deploy, undeploy, rollback or republish touched, with their generations
    (``changed`` False: the device already had exactly that)."""

    devices: tuple[SlotChange, ...]


@dataclass(frozen=True)
class ConfigUpdate:
    """A config after a layer was stored or deleted (None: its last layer went), and the
    devices whose slots were re-resolved."""

    config: NamedConfig | None
    devices: tuple[SlotChange, ...]


@dataclass(frozen=True)
class IngestCounts:
    """Inbound MQTT messages since the controller (or an ingest worker) started."""

    accepted: int
    rejected: int
    rejected_by_channel: dict[str, int]
    last_rejection: str | None
    """The last rejection's log line."""


@dataclass(frozen=True)
class DocumentSignatures:
    """What one device's desired document carries to be verified (``controller.trust.signing``
    makes it, ``controller.fleet.desired`` puts it in the document)."""

    manifests: Mapping[int, SignedManifest]
    """Signed manifest per model version id."""
    rollbacks: Mapping[str, RollbackAuthorization]
    """Rollback authorisation per slot (model) name, for versions older than the newest."""
    fleet_keys: tuple[KeyEndorsement, ...] = ()
