"""The settings only environment variables set: health thresholds, telemetry retention, the
rollout lease TTL and the ingest session expiry, one pydantic-settings tree read once at start;
a bad value stops the start with one line naming the variable and a valid value."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Annotated, Any

from pydantic import Field, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from controller.settings.defaults import (
    DEFAULT_INGEST_SESSION_EXPIRY_S,
    DEFAULT_RETENTION_RAW_S,
    DEFAULT_RETENTION_ROLLUP_S,
    DEFAULT_ROLLOUT_LEASE_TTL_S,
    HEALTH_ENV_PREFIX,
    INGEST_SESSION_EXPIRY_ENV,
    RETENTION_RAW_ENV,
    RETENTION_ROLLUP_ENV,
    ROLLOUT_LEASE_TTL_ENV,
)
from controller.settings.source import INVALID, Opt, OptEnvSource, one_line, opt_of, refuse


@dataclass(frozen=True)
class HealthThresholds:
    """When a device stops being healthy (controller/fleet/health.py); each can be set by
    ``JETFLEET_HEALTH_<NAME>`` (e.g. ``JETFLEET_HEALTH_P99_MS=250``)."""

    offline_after_s: float = 90.0
    """Nothing received for this long → offline (3 missed samples at the default 30 s)."""
    window_s: float = 300.0
    """The recent telemetry window the other thresholds are judged over."""
    error_rate: float = 0.05
    """Errors / requests above this → degraded."""
    min_requests: int = 20
    """Error rates over fewer requests than this are not judged (one error in two is noise)."""
    p99_ms: float = 500.0
    """Worst p99 latency of any model above this → degraded."""
    temperature_c: float = 85.0
    """Hottest sensor above this → degraded (Orin throttles from about 99 °C)."""
    memory_headroom: float = 0.10
    """Available / total memory below this fraction → degraded (CPU and GPU share it on Jetson)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> HealthThresholds:
        """Defaults overridden by ``JETFLEET_HEALTH_*`` variables; a bad value names the fix."""
        return EnvironmentSettings.read(env).health()


_H = HealthThresholds


def _health(name: str) -> Opt:
    return Opt(env=HEALTH_ENV_PREFIX + name.upper())


class EnvironmentSettings(BaseSettings):
    """The variables, their defaults and their checks; ``health_<name>`` is
    ``HealthThresholds.<name>`` (``JETFLEET_HEALTH_<NAME>``)."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True)

    health_offline_after_s: Annotated[float, _health("offline_after_s")] = _H.offline_after_s
    health_window_s: Annotated[float, _health("window_s")] = _H.window_s
    health_error_rate: Annotated[float, _health("error_rate")] = _H.error_rate
    health_min_requests: Annotated[int, _health("min_requests")] = _H.min_requests
    health_p99_ms: Annotated[float, _health("p99_ms")] = _H.p99_ms
    health_temperature_c: Annotated[float, _health("temperature_c")] = _H.temperature_c
    health_memory_headroom: Annotated[float, _health("memory_headroom")] = _H.memory_headroom
    retention_raw_hours: Annotated[float, Opt(env=RETENTION_RAW_ENV)] = Field(
        default=DEFAULT_RETENTION_RAW_S / 3600,
        description="How long raw telemetry samples are kept (hours).",
    )
    retention_rollup_days: Annotated[float, Opt(env=RETENTION_ROLLUP_ENV)] = Field(
        default=DEFAULT_RETENTION_ROLLUP_S / 86400,
        description="How long minute rollups are kept (days).",
    )
    rollout_lease_ttl_s: Annotated[float, Opt(env=ROLLOUT_LEASE_TTL_ENV)] = Field(
        default=DEFAULT_ROLLOUT_LEASE_TTL_S,
        description="With several replicas, how long after the rollout runner's last renewal "
        "another takes over (seconds); the same on every replica of one database.",
    )
    ingest_session_expiry_s: Annotated[int, Opt(env=INGEST_SESSION_EXPIRY_ENV)] = Field(
        default=DEFAULT_INGEST_SESSION_EXPIRY_S,
        description="How long the broker keeps ingest sessions after their connection ends "
        "(seconds; 0: clean sessions, nothing kept).",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)  # the variables come through read(env)

    @classmethod
    def read(cls, env: Mapping[str, str]) -> EnvironmentSettings:
        """The settings from ``env``; :class:`InvalidInput` names a bad variable."""
        values = OptEnvSource(cls, env)()
        try:
            return cls(**values)
        except ValidationError as exc:
            raise one_line(exc, cls, frozenset(values)) from None

    def health(self) -> HealthThresholds:
        return HealthThresholds(
            **{f.name: getattr(self, "health_" + f.name) for f in fields(HealthThresholds)}
        )

    @field_validator(*(f"health_{f.name}" for f in fields(HealthThresholds)), mode="before")
    @classmethod
    def _not_negative(cls, raw: Any, info: ValidationInfo) -> Any:
        if not isinstance(raw, str):
            return raw
        name, default = cls._env_and_default(info)
        try:
            number = float(raw)
        except ValueError:
            raise refuse(
                INVALID, f"{name}={raw!r} is not a number: set it to e.g. {default}"
            ) from None
        if number < 0:
            raise refuse(INVALID, f"{name} must be >= 0, got {raw}")
        return int(number) if info.field_name == "health_min_requests" else number

    @field_validator(
        "retention_raw_hours", "retention_rollup_days", "rollout_lease_ttl_s", mode="before"
    )
    @classmethod
    def _positive_number(cls, raw: Any, info: ValidationInfo) -> Any:
        if not isinstance(raw, str):
            return raw
        name, default = cls._env_and_default(info)
        try:
            value = float(raw)
        except ValueError:
            raise refuse(
                INVALID, f"{name}={raw!r} is not a number: set e.g. {name}={default:g}"
            ) from None
        if value <= 0:
            raise refuse(INVALID, f"{name} must be > 0, got {raw}")
        return value

    @field_validator("ingest_session_expiry_s", mode="before")
    @classmethod
    def _whole_seconds(cls, raw: Any) -> Any:
        if not isinstance(raw, str):
            return raw
        try:
            value = int(raw)
        except ValueError:
            value = -1
        if not 0 <= value <= 0xFFFFFFFE:
            raise refuse(
                INVALID,
                f"{INGEST_SESSION_EXPIRY_ENV}={raw!r}: give whole seconds, 0 to 4294967294 "
                f"(0: nothing kept while the controller is down; default "
                f"{DEFAULT_INGEST_SESSION_EXPIRY_S})",
            )
        return value

    @classmethod
    def _env_and_default(cls, info: ValidationInfo) -> tuple[str, Any]:
        field = cls.model_fields[str(info.field_name)]
        return str(opt_of(field).env), field.default
