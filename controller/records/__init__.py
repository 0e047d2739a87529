"""What the database stores and hands to the rest of the controller: plain frozen records.

No ORM objects and no behaviour beyond a record's own derived values, save the two pure
decisions the database takes under its row locks (:func:`.engines.decide_lease`,
:func:`.engines.may_replace`). One module per area: :mod:`.catalog` (model versions, config
layers), :mod:`.fleet` (devices, planned and reported slots), :mod:`.telemetry` (samples,
events, vitals), :mod:`.rollouts` (rollout specs, states, targets, audit), :mod:`.agents`
(agent releases, orders, what devices report of their agent), :mod:`.auth` (roles, tokens),
:mod:`.engines` (build leases and who may take one, engine provenance and trust, who may
replace a build), :mod:`.views` (what services answer beyond stored rows: versions with
their URL, resolved configs, deployments, ingest counts, document signatures). Every name is
importable from ``controller.records`` directly.

A leaf of the controller: every package may import it, and it imports only ``shared``,
``controller.errors``, the standard library and pydantic (never a capability package, so
``controller.db`` at the bottom of the layers can return these types).
"""

from controller.records.agents import AgentOrderRecord, AgentReleaseRecord, AgentReport
from controller.records.auth import MintedToken, Role, TokenRecord
from controller.records.catalog import AnalysisState, ConfigLayerRecord, VersionRecord
from controller.records.engines import (
    UNRECORDED,
    Decision,
    Lease,
    Provenance,
    TrustEntry,
    TrustMode,
    UploaderKind,
    check_mode,
    decide_lease,
    may_replace,
)
from controller.records.fleet import DeviceRecord, PlannedSlot, SlotChange, SlotPlan, SlotRef
from controller.records.rollouts import (
    ACTIVE,
    AuditEntry,
    Baseline,
    FailurePolicy,
    Gates,
    Operation,
    Rollout,
    RolloutSpec,
    RolloutState,
    Strategy,
    Target,
    TargetSpec,
    TargetStatus,
)
from controller.records.telemetry import EventEntry, TelemetryRecord, Vitals
from controller.records.views import (
    ConfigUpdate,
    Deployment,
    DocumentSignatures,
    IngestCounts,
    NamedConfig,
    ResolvedConfig,
    TensorInfo,
    VersionView,
)

__all__ = [
    "ACTIVE",
    "UNRECORDED",
    "AgentOrderRecord",
    "AgentReleaseRecord",
    "AgentReport",
    "AnalysisState",
    "AuditEntry",
    "Baseline",
    "ConfigLayerRecord",
    "ConfigUpdate",
    "Decision",
    "Deployment",
    "DeviceRecord",
    "DocumentSignatures",
    "EventEntry",
    "FailurePolicy",
    "Gates",
    "IngestCounts",
    "Lease",
    "MintedToken",
    "NamedConfig",
    "Operation",
    "PlannedSlot",
    "Provenance",
    "ResolvedConfig",
    "Role",
    "Rollout",
    "RolloutSpec",
    "RolloutState",
    "SlotChange",
    "SlotPlan",
    "SlotRef",
    "Strategy",
    "Target",
    "TargetSpec",
    "TargetStatus",
    "TelemetryRecord",
    "TensorInfo",
    "TokenRecord",
    "TrustEntry",
    "TrustMode",
    "UploaderKind",
    "VersionRecord",
    "VersionView",
    "Vitals",
    "check_mode",
    "decide_lease",
    "may_replace",
]
