"""The controller's tables as SQLAlchemy 2.0 typed ORM classes (the migrations must match them)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    """Now, timezone-aware in UTC (the only kind of datetime the tables hold)."""
    return datetime.now(timezone.utc)


class UtcDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on PostgreSQL and SQLite alike.

    SQLite stores no offset, so values are normalised to UTC on the way in and tagged UTC on the
    way out; naive datetimes are refused rather than guessed.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: pass a timezone-aware one")
        value = value.astimezone(timezone.utc)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UtcDateTime, dict[str, Any]: JSON, list[Any]: JSON}


class Device(Base):
    """A gateway, created on first contact over MQTT."""

    __tablename__ = "devices"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    labels: Mapped[dict[str, Any]] = mapped_column(default=dict)
    online: Mapped[bool] = mapped_column(Boolean, default=False)
    last_seen: Mapped[datetime | None]
    desired_generation: Mapped[int] = mapped_column(Integer, default=0)
    observed_generation: Mapped[int | None] = mapped_column(Integer)
    facts: Mapped[dict[str, Any] | None]
    reported_slots: Mapped[list[Any]] = mapped_column(default=list)
    serve_url: Mapped[str | None] = mapped_column(String(512))
    pinned_class: Mapped[str | None] = mapped_column(String(160))
    """The hardware class the device may upload engines for (revision 0012): the class of its
    first reported facts, or the one an operator accepted; a later report of another class
    is flagged, not trusted."""
    agent_version: Mapped[str | None] = mapped_column(String(64), default=None)
    """The agent release the device last reported running (revision 0014)."""
    agent_update: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    """Its latest agent update as it reported it (``shared.agent_releases.AgentUpdateStatus``)."""
    agent_order: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    """The agent release its desired document orders:
    ``{"release_id", "allow_downgrade", "confirm_within_s"}``."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Model(Base):
    """A model name; its versions hold the bytes."""

    __tablename__ = "models"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Artifact(Base):
    """Content-addressed bytes in the artifact store."""

    __tablename__ = "artifacts"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ModelVersion(Base):
    """One immutable version of a model: its artifact and tensor signature."""

    __tablename__ = "model_versions"
    __table_args__ = (UniqueConstraint("model", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    model: Mapped[str] = mapped_column(String(64), ForeignKey("models.name"))
    version: Mapped[str] = mapped_column(String(64))
    sha256: Mapped[str] = mapped_column(String(64), ForeignKey("artifacts.sha256"))
    inputs: Mapped[list[Any]] = mapped_column(default=list)
    outputs: Mapped[list[Any]] = mapped_column(default=list)
    has_qdq: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    analysis: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    """Static delegate analysis per TensorRT version (controller.analysis.AnalysisReport JSON)."""
    signed_manifest: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    """The version's manifest signed with the fleet key, sent to agents in the slot."""
    warmup: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    """Warm-up inputs (revision 0010): ``given`` (shapes/values at push), ``reference_error``,
    ``unknown`` (ONNX Runtime failed on them: deploys are refused)."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Deployment(Base):
    """The model version a device must serve in the slot of one model (one row per slot)."""

    __tablename__ = "deployments"
    __table_args__ = (UniqueConstraint("device_id", "model"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    device_id: Mapped[str] = mapped_column(String(64), ForeignKey("devices.id"))
    model: Mapped[str] = mapped_column(String(64), ForeignKey("models.name"))
    model_version_id: Mapped[int] = mapped_column(Integer, ForeignKey("model_versions.id"))
    delegate: Mapped[dict[str, Any]] = mapped_column(default=dict)
    config: Mapped[str | None] = mapped_column(String(64))
    """Name of the delegate config the slot resolves (None = the fleet-wide default config)."""
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class TelemetrySample(Base):
    """One telemetry sample; (device, sample_id) makes redelivery idempotent."""

    __tablename__ = "telemetry_samples"
    __table_args__ = (UniqueConstraint("device_id", "sample_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    device_id: Mapped[str] = mapped_column(String(64), ForeignKey("devices.id"), index=True)
    sample_id: Mapped[str] = mapped_column(String(128))
    ts: Mapped[datetime]
    interval_s: Mapped[float] = mapped_column(Float)
    cpu_percent: Mapped[float] = mapped_column(Float)
    memory_used_bytes: Mapped[int] = mapped_column(BigInteger)
    memory_total_bytes: Mapped[int] = mapped_column(BigInteger)
    models: Mapped[list[Any]] = mapped_column(default=list)
    # Migration 0004: what health and charts query are columns; the rest is ``extra``.
    requests: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    errors: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    latency_p50_ms: Mapped[float | None] = mapped_column(Float)
    latency_p99_ms: Mapped[float | None] = mapped_column(Float)
    gpu_load_percent: Mapped[float | None] = mapped_column(Float)
    temperature_max_c: Mapped[float | None] = mapped_column(Float)
    power_mw: Mapped[float | None] = mapped_column(Float)
    memory_available_bytes: Mapped[int | None] = mapped_column(BigInteger)
    largest_free_block_bytes: Mapped[int | None] = mapped_column(BigInteger)
    nvmap_used_bytes: Mapped[int | None] = mapped_column(BigInteger)
    disk_free_bytes: Mapped[int | None] = mapped_column(BigInteger)
    queue_depth: Mapped[int | None] = mapped_column(Integer)
    swaps: Mapped[int | None] = mapped_column(Integer)
    spool_dropped: Mapped[int | None] = mapped_column(BigInteger)
    extra: Mapped[dict[str, Any] | None] = mapped_column(default=None)


class EventRecord(Base):
    """One device event; (device, event_id) makes redelivery idempotent."""

    __tablename__ = "events"
    __table_args__ = (UniqueConstraint("device_id", "event_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    device_id: Mapped[str] = mapped_column(String(64), ForeignKey("devices.id"), index=True)
    event_id: Mapped[str] = mapped_column(String(128))
    ts: Mapped[datetime]
    kind: Mapped[str] = mapped_column(String(32))
    slot: Mapped[str | None] = mapped_column(String(64))
    message: Mapped[str] = mapped_column(Text, default="")
    data: Mapped[dict[str, Any]] = mapped_column(default=dict)


class DelegateConfigLayer(Base):
    """One layer of a named delegate config: a scope and partial DelegateConfig values."""

    __tablename__ = "delegate_config_layers"
    __table_args__ = (UniqueConstraint("name", "scope"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64), index=True)
    scope: Mapped[str] = mapped_column(String(256))
    values: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class EngineRecord(Base):
    """One row per engine key: the first manifest stored under it, and the fleet's signature
    cache (``signed_manifest``, read by key in :mod:`controller.db.signing_store`). Every manifest,
    one per tuning tag, is an :class:`EngineTuning`."""

    __tablename__ = "engines"

    engine_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64), ForeignKey("artifacts.sha256"))
    size: Mapped[int] = mapped_column(BigInteger)
    built_by: Mapped[str] = mapped_column(String(64))
    manifest: Mapped[dict[str, Any]] = mapped_column(default=dict)
    signed_manifest: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    """The engine's manifest signed with the fleet key when the controller accepted it."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class EngineTuning(Base):
    """A built engine's manifest under one tuning tag (power mode, clocks: ``TuningTag.label``);
    its bytes are the artifact ``sha256``. Twins in the same power mode share it."""

    __tablename__ = "engine_tunings"

    engine_key: Mapped[str] = mapped_column(
        String(64), ForeignKey("engines.engine_key"), primary_key=True
    )
    tuning: Mapped[str] = mapped_column(String(128), primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64), ForeignKey("artifacts.sha256"))
    size: Mapped[int] = mapped_column(BigInteger)
    built_by: Mapped[str] = mapped_column(String(64))
    manifest: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    uploader: Mapped[str] = mapped_column(String(16), default="unknown", server_default="unknown")
    """``device``, ``operator``, or ``unknown`` (stored before migration 0009)."""
    uploaded_by: Mapped[str | None] = mapped_column(String(64), default=None)
    """The uploading device's id or operator token's name (authenticated, unlike ``built_by``)."""
    hardware_class: Mapped[str | None] = mapped_column(String(128), default=None)
    """The uploading device's hardware class (whose trust mode decides whether twins get it)."""
    approved_by: Mapped[str | None] = mapped_column(String(64), default=None)
    """The operator who approved this build for twins (``jetfleet engines approve``)."""
    approved_at: Mapped[datetime | None] = mapped_column(default=None)


class EngineTrust(Base):
    """Per hardware class (or ``default``): are device builds shared with twins at once
    (``devices``) or after an operator's approval (``approval``)?
    See controller/trust/engine_trust.py."""

    __tablename__ = "engine_trust"

    hardware_class: Mapped[str] = mapped_column(String(128), primary_key=True)
    mode: Mapped[str] = mapped_column(String(16))
    set_by: Mapped[str | None] = mapped_column(String(64), default=None)
    set_at: Mapped[datetime] = mapped_column(default=utcnow)


class EngineFailure(Base):
    """An engine key TensorRT could not build for reasons of the model (revision 0013): twins
    serve the version on ONNX Runtime instead of building it again."""

    __tablename__ = "engine_failures"

    engine_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    device_id: Mapped[str] = mapped_column(String(64))
    reason: Mapped[str] = mapped_column(String(2000))
    failed_at: Mapped[datetime] = mapped_column(default=utcnow)


class BuildLease(Base):
    """Which device may build the engine ``engine_key`` under ``tuning`` until ``expires_at``."""

    __tablename__ = "build_leases"

    engine_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    tuning: Mapped[str] = mapped_column(String(128), primary_key=True)
    holder: Mapped[str] = mapped_column(String(64))
    expires_at: Mapped[datetime]
