"""The agent's settings: one validated tree from a TOML file and ``JETFLEET_*`` variables.

Environment variables win over the file, so one file can serve several agents on a box (the demo
starts three) while each gets its own ``JETFLEET_DEVICE_ID`` and ports.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)
from pydantic_settings import SettingsError as PydanticSettingsError

from agent.errors import SettingsError
from agent.hardware.sim_profiles import PROFILES
from agent.identity_file import identity_path, identity_settings, read_identity
from shared.topics import DEFAULT_PREFIX, DEVICE_ID_PATTERN, TopicError, Topics
from shared.transport import MqttAuth, parse_broker_url

ENV_PREFIX = "JETFLEET_"

_HOST_PORT = re.compile(r"^(?P<host>[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>\d{1,5})$")


def split_host_port(text: str) -> tuple[str, int]:
    """``host:port`` → (host, port); ValueError naming the expected form otherwise."""
    match = _HOST_PORT.match(text)
    if match is None or not 0 <= int(match["port"]) <= 65535:
        raise ValueError(f"expected HOST:PORT (e.g. 127.0.0.1:8000), got {text!r}")
    return match["host"].strip("[]"), int(match["port"])


class AgentSettings(BaseSettings):
    """Everything one agent needs to know before it starts."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", frozen=True, validate_default=True
    )

    device_id: str | None = Field(
        default=None,
        pattern=DEVICE_ID_PATTERN,
        description="This gateway's id: one MQTT topic level. Required to run.",
    )
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="Labels this agent reports and asks for at enrolment; the controller "
        "ignores them (its selectors use the labels of the enrolment token or of `jetfleet "
        "devices label`) and enrolment fills this from the token's. "
        'env: a JSON object {"site": "lab"}.',
    )
    broker_url: str = Field(
        default="mqtt://127.0.0.1:1883",
        description="MQTT broker as mqtt://host:port, or mqtts://host:port for TLS (port 8883).",
    )
    broker_username: str | None = Field(
        default=None,
        description="Broker user name; enrolment (`jetfleet-agent enroll`) sets it.",
    )
    broker_password: SecretStr | None = Field(
        default=None, description="Broker password; enrolment sets it."
    )
    broker_ca_file: Path | None = Field(
        default=None,
        description="CA bundle that signed the broker's certificate (mqtts://); default: the "
        "system's CA store.",
    )
    broker_cert_file: Path | None = Field(
        default=None, description="Client certificate for the broker (mqtts://, optional)."
    )
    broker_key_file: Path | None = Field(
        default=None, description="Private key of broker_cert_file."
    )
    api_token: SecretStr | None = Field(
        default=None,
        description="Bearer token for the controller's HTTP API (engines, leases, artifacts); "
        "enrolment sets it.",
    )
    controller_ca_file: Path | None = Field(
        default=None,
        description="CA bundle that signed the controller's certificate (https://); default: "
        "the system's CA store.",
    )
    controller_url: str | None = Field(
        default=None,
        description="Controller base URL (http://host:port); resolves relative artifact URLs.",
    )
    state_dir: Path = Field(
        default=Path("/var/lib/jetfleet-agent"),
        description="Where downloads, models and the last desired document are kept.",
    )
    serve_address: str = Field(
        default="127.0.0.1:8000",
        description="HOST:PORT the KServe v2 REST server binds (port 0 = any free port).",
    )
    serve_shared_memory: bool = Field(
        default=False,
        description="Let local clients register /dev/shm regions and pass tensors through them "
        "(Triton's system shared-memory extension; Triton: --allow-client-shm).",
    )
    serve_shared_memory_uids: list[int] = Field(
        default_factory=list,
        description="Users (uids) besides the agent's own whose /dev/shm objects clients may "
        "register, as a JSON list, e.g. [1001]; the agent cannot tell which client registered a "
        "region (HTTP over TCP carries no peer credentials), so the object's owner decides.",
    )
    runtime: Literal["auto", "onnxruntime", "tensorrt"] = Field(
        default="auto",
        description="Inference runtime: auto = TensorRT where it imports and a CUDA device "
        "answers, else ONNX Runtime; JETFLEET_RUNTIME overrides.",
    )
    tensorrt_python: str | None = Field(
        default=None,
        description="The interpreter that can import tensorrt (the TensorRT host runs under it); "
        "default: found among JetPack's (/usr/bin/python3, python3.8, 3.10, 3.12...), then the "
        "agent's own. When set, only this one is asked. env: JETFLEET_TENSORRT_PYTHON.",
    )
    engine_cache_mib: int = Field(
        default=2048, gt=0, description="Size bound of the local engine cache (LRU eviction)."
    )
    build_timeout_s: float = Field(
        default=3600.0, gt=0, description="A local engine build is killed after this long."
    )
    build_lease_s: float = Field(
        default=900.0, gt=0, description="How long this device holds a fleet build lease."
    )
    topic_prefix: str = Field(default=DEFAULT_PREFIX, description="MQTT topic prefix.")
    telemetry_interval_s: float = Field(
        default=10.0, gt=0, le=3600, description="Seconds between telemetry samples."
    )
    spool_max_mib: int = Field(
        default=64,
        gt=0,
        description="Size bound of the offline telemetry/event spool in the state directory "
        "(MiB); the oldest messages are dropped, and counted, beyond it.",
    )
    spool_max_age_s: float = Field(
        default=7 * 24 * 3600.0,
        gt=0,
        description="Spooled messages older than this (seconds) are dropped, and counted.",
    )
    disabled_collectors: tuple[Literal["jetson", "jtop", "nvml"], ...] = Field(
        default=(),
        description='Telemetry sources not to sample; env: a JSON list, e.g. ["nvml"].',
    )
    simulated_profile: str | None = Field(
        default=None,
        description="Name of a simulated device profile overlaying the probed facts (demo only).",
    )
    swap_mode: Literal["in_process", "worker_process"] = Field(
        default="in_process",
        description="in_process: every engine in the agent's process (least memory); "
        "worker_process: each model in a child process, a swap starts a new one (all memory "
        "returns to the OS; costs a process per model, ~1 GB with TensorRT). "
        "See agent/swap/worker.py.",
    )
    swap_drain_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="Longest wait for in-flight requests on a swapped-out engine.",
    )
    memory_budget_fraction: float = Field(
        default=0.85,
        gt=0,
        le=1,
        description="Share of total memory the resident models may need together (admission).",
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Log verbosity on stderr."
    )

    @field_validator("broker_url")
    @classmethod
    def _check_broker_url(cls, value: str) -> str:
        broker_address(value)
        return value

    @field_validator("controller_url")
    @classmethod
    def _check_controller_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"expected http://host:port, got {value!r}")
        return value.rstrip("/")

    @field_validator("serve_address")
    @classmethod
    def _check_serve_address(cls, value: str) -> str:
        split_host_port(value)
        return value

    @field_validator("topic_prefix")
    @classmethod
    def _check_prefix(cls, value: str) -> str:
        try:
            Topics(value)
        except TopicError as exc:
            raise ValueError(str(exc)) from exc
        return value

    @field_validator("simulated_profile")
    @classmethod
    def _check_profile(cls, value: str | None) -> str | None:
        if value is not None and value not in PROFILES:
            raise ValueError(f"unknown profile {value!r}; known: {', '.join(sorted(PROFILES))}")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Environment first, then keyword arguments (the config file's values)."""
        return env_settings, init_settings

    def require_device_id(self) -> str:
        """The device id, or a SettingsError saying how to set it."""
        if self.device_id is None:
            raise SettingsError(
                "device_id", "missing: set JETFLEET_DEVICE_ID or device_id in the config file"
            )
        return self.device_id

    @property
    def broker(self) -> tuple[str, int]:
        """(host, port) of the broker."""
        return broker_address(self.broker_url)

    @property
    def mqtt_auth(self) -> MqttAuth:
        """Broker credentials and TLS files; TLS is on when the URL is ``mqtts://``."""
        password = self.broker_password.get_secret_value() if self.broker_password else None
        try:
            return MqttAuth(
                username=self.broker_username,
                password=password,
                ca_file=self.broker_ca_file,
                cert_file=self.broker_cert_file,
                key_file=self.broker_key_file,
            )
        except ValueError as exc:
            raise SettingsError("broker_cert_file/broker_key_file", str(exc)) from exc

    @property
    def broker_tls(self) -> bool:
        """True for an ``mqtts://`` broker URL."""
        return parse_broker_url(self.broker_url).tls

    @property
    def serve(self) -> tuple[str, int]:
        """(host, port) the serving endpoint binds."""
        return split_host_port(self.serve_address)


def broker_address(url: str) -> tuple[str, int]:
    """``mqtt://host:port`` or ``mqtts://host:port`` → (host, port); default ports 1883 / 8883."""
    address = parse_broker_url(url)
    return address.host, address.port


def _key_name(loc: tuple[Any, ...], from_file: set[str]) -> str:
    """The key as the operator wrote it: the env variable when set, else the file key."""
    if not loc:
        return "<settings>"
    field = str(loc[0])
    env_name = f"{ENV_PREFIX}{field.upper()}"
    if env_name in {name.upper() for name in os.environ}:
        return env_name
    if field in from_file:
        return f"{field} (config file)"
    return f"{field} ({env_name})"


def load_settings(config: Path | None = None, *, with_identity: bool = True) -> AgentSettings:
    """Read ``config`` (TOML, optional), the environment and, unless ``with_identity`` is
    False, the enrolled identity in the state directory; SettingsError names a bad key."""
    file_values: dict[str, Any] = {}
    if config is not None:
        if not config.is_file():
            raise SettingsError("--config", f"file {config} not found")
        try:
            file_values = dict(TomlConfigSettingsSource(AgentSettings, toml_file=config)())
        except (OSError, ValueError) as exc:
            raise SettingsError("--config", f"cannot read {config}: {exc}") from exc
    try:
        settings = AgentSettings(**file_values)
        return _with_identity(settings, file_values) if with_identity else settings
    except ValidationError as exc:
        first = exc.errors()[0]
        raise SettingsError(_key_name(first["loc"], set(file_values)), first["msg"]) from exc
    except PydanticSettingsError as exc:
        match = re.search(r'field "([a-z_]+)"', str(exc))
        key = f"{ENV_PREFIX}{match[1].upper()}" if match else "<environment>"
        cause = exc.__cause__ or exc
        raise SettingsError(key, f"not valid JSON ({cause})") from exc


def _with_identity(settings: AgentSettings, file_values: dict[str, Any]) -> AgentSettings:
    """``settings`` with the enrolled identity (``<state_dir>/identity.json``) filling what
    neither the config file nor the environment set (see agent/identity_file.py)."""
    try:
        identity = read_identity(settings.state_dir)
    except ValueError as exc:
        raise SettingsError("identity.json", str(exc)) from exc
    if identity is None:
        return settings
    enrolled_as = identity["device_id"]
    if settings.device_id is not None and settings.device_id != enrolled_as:
        raise SettingsError(
            _key_name(("device_id",), set(file_values)),
            f"{settings.device_id!r}, but {identity_path(settings.state_dir)} is the identity of "
            f"{enrolled_as!r}: enrol this device again or use another state_dir",
        )
    fill = {
        key: value
        for key, value in identity_settings(identity).items()
        if key not in settings.model_fields_set
    }
    return AgentSettings(**{**fill, **file_values}) if fill else settings
