"""Who may put an engine into the fleet store, and who may pull it (pure).

The store hands every twin an engine signed with the fleet key, and a twin trusts that signature.
So a build is only as trustworthy as its uploader:

- **A device uploads only for itself.** Its manifest's validity must be the validity its own
  reported facts give (:mod:`shared.engine_validity`, the derivation the agent uses): same runtime
  version, platform, GPU, part number, hardware class. The providers and the DLA core are the
  build's choice. A device that has reported no facts yet cannot upload. Its facts must also
  give the class it is **pinned** to (``devices.pinned_class``: its first report's class, or one
  an operator accepted with ``jetfleet devices accept-class``): a gateway credential that reports
  another hardware profile cannot upload for that profile's class; the change is
  shown in ``jetfleet devices ls`` until an operator accepts it (a JetPack upgrade is one).
  Operators (and the anonymous admin of a controller run without authentication) upload anything.
- **Twins pull a device's build only when the operator said so**, per hardware class: ``devices``
  (device builds are shared with twins as soon as they are stored) or ``approval`` (a build waits
  until an operator approves it; until then only its builder gets it, and the store answers its
  twins 404, so they build their own). An operator's upload, or an approved build, is shared in
  either mode.
- **Only an operator replaces a stored build**, and only one no operator approved
  (:func:`controller.records.may_replace`: the database decides it under the build's row lock,
  so it lives with the records ``controller.db`` may import).

**The default is ``approval``.** The validity check keeps a gateway inside its own class, but the
facts are the device's own word, and within its class a compromised gateway could otherwise hand
every twin an engine the fleet key vouches for. The agent's check before a swap does not close
that gap: the plan is deserialised (TensorRT parses untrusted bytes) before it runs, the
reference inputs are a fixed seed any device can download, and a version without references is
checked for finite outputs only. The price of the default is compute, not availability: twins
build locally, as they would without a store, until an operator approves the build
(``jetfleet engines approve``) or trusts the class (``jetfleet engines trust CLASS --devices``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from controller.errors import InvalidInput
from controller.records import UNRECORDED as UNRECORDED
from controller.records import Provenance as Provenance
from controller.records import TrustEntry as TrustEntry
from controller.records import TrustMode as TrustMode
from controller.records import UploaderKind as UploaderKind
from controller.records import check_mode as check_mode
from shared.engine_keys import ValidityKey
from shared.engine_validity import ort_validity, trt_validity
from shared.facts import DeviceFacts
from shared.hardware_class import HARDWARE_CLASS_PATTERN, hardware_class

EngineStatus = Literal["operator", "approved", "trusted", "pending"]
"""Whether twins get a build: uploaded by an operator, approved by one, built by a device of a
trusted class, or pending approval (only its builder gets it)."""

TRUST_MODES: tuple[str, ...] = get_args(TrustMode)
DEFAULT_TRUST: TrustMode = "approval"
FLEET_DEFAULT = "default"
"""The trust entry that applies to every hardware class without its own."""
_CLASS = re.compile(HARDWARE_CLASS_PATTERN)


@dataclass(frozen=True)
class Uploader:
    """Who sends an engine: a device (its id) or an operator (its token's name)."""

    kind: Literal["device", "operator"]
    name: str


@dataclass(frozen=True)
class UploadDecision:
    """May this upload be stored? ``reason`` says why not; ``hardware_class`` is the device's."""

    allowed: bool
    reason: str = ""
    hardware_class: str | None = None


def check_upload(
    uploader: Uploader,
    validity: ValidityKey,
    facts: DeviceFacts | None,
    pinned_class: str | None = None,
) -> UploadDecision:
    """May ``uploader`` store an engine of ``validity``? A device only for its own (``facts``),
    and only while those facts give the class it is pinned to (``pinned_class``: fixed by its
    first report or accepted by an operator)."""
    if uploader.kind == "operator":
        return UploadDecision(True)
    device = uploader.name
    if facts is None:
        return UploadDecision(
            False,
            f"device {device!r} has reported no facts yet: the controller accepts an engine from "
            "a device only for that device's own validity, so its agent must report (connect "
            "to the broker) before it uploads",
        )
    own_class = hardware_class(facts)
    if pinned_class is not None and own_class != pinned_class:
        return UploadDecision(
            False,
            f"device {device!r} was first seen as class {pinned_class} and now reports class "
            f"{own_class}: it may upload engines only for {pinned_class} until an operator "
            f"accepts the change (`jetfleet devices accept-class {device}`)",
            own_class,
        )
    missing = _missing_runtime(facts, validity.runtime)
    if missing:
        return UploadDecision(
            False,
            f"device {device!r} (class {own_class}) reports {missing}, so it cannot upload a "
            f"{validity.runtime} engine for {validity.device_name or validity.platform}: a "
            "device may upload engines only for its own validity and hardware class",
            own_class,
        )
    own = _own_validity(facts, validity)
    differs = [
        f"validity.{name} is {getattr(validity, name)!r}, its facts give {getattr(own, name)!r}"
        for name in ValidityKey.model_fields
        if getattr(validity, name) != getattr(own, name)
    ]
    if differs:
        return UploadDecision(
            False,
            f"device {device!r} (class {own_class}) may upload engines only for its own validity "
            f"and hardware class: {'; '.join(differs)}",
            own_class,
        )
    return UploadDecision(True, hardware_class=own_class)


def _missing_runtime(facts: DeviceFacts, runtime: str) -> str | None:
    if runtime == "onnxruntime":
        return None if facts.onnxruntime_version else "no ONNX Runtime version"
    if not facts.tensorrt_version:
        return "no TensorRT version"
    if facts.gpu is None or not facts.gpu.compute_capability:
        return "no GPU compute capability"
    return None


def _own_validity(facts: DeviceFacts, claimed: ValidityKey) -> ValidityKey:
    """The validity the device's facts give, with the build's own choices taken from
    ``claimed`` (providers, DLA core)."""
    if claimed.runtime == "onnxruntime":
        return ort_validity(facts, claimed.providers)
    return trt_validity(facts, claimed.dla_core)


def provenance_of(uploader: Uploader, decision: UploadDecision) -> Provenance:
    """What the store records about an allowed upload."""
    return Provenance(uploader.kind, uploader.name, decision.hardware_class)


def trust_mode(modes: Mapping[str, TrustMode], hw_class: str | None) -> TrustMode:
    """The mode of ``hw_class``: its own entry, else the fleet default entry, else
    :data:`DEFAULT_TRUST`."""
    if hw_class is not None and hw_class in modes:
        return modes[hw_class]
    return modes.get(FLEET_DEFAULT, DEFAULT_TRUST)


def status(provenance: Provenance, mode: TrustMode) -> EngineStatus:
    """Whether twins get this build (see :data:`EngineStatus`)."""
    if provenance.uploader == "operator":
        return "operator"
    if provenance.approved_by is not None:
        return "approved"
    return "trusted" if mode == "devices" else "pending"


def may_pull(device_id: str | None, provenance: Provenance, mode: TrustMode) -> bool:
    """May device ``device_id`` pull this build? None asks for an operator or viewer, who see
    every build. A builder always gets its own."""
    if device_id is None:
        return True
    if provenance.uploader == "device" and provenance.uploaded_by == device_id:
        return True
    return status(provenance, mode) != "pending"


def check_class(name: str) -> str:
    """``name`` when it is a hardware class (``jetson-orin-nano-8gb/jp6.2``) or
    :data:`FLEET_DEFAULT`; else InvalidInput."""
    if not _CLASS.match(name):
        raise InvalidInput(
            f"invalid hardware class {name[:40]!r}: lower-case like jetson-orin-nano-8gb/jp6.2 "
            f"or cpu-x86_64 (see `jetfleet devices ls`), or {FLEET_DEFAULT!r} for every class "
            "without its own setting"
        )
    return name
