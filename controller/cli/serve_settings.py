"""``jetfleet serve``'s main options as a function: :func:`build_settings` gives the settings of
the options it names through the one settings tree (:class:`~controller.settings.ServeOptions`),
with the errors ``jetfleet serve`` shows (click's, naming the option).

Sizes (``2G``, ``512MiB``) parse with :func:`parse_size`; :class:`Size` is their click type.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from controller.cli.serve_options import Size, as_click_error
from controller.errors import ControllerError
from controller.settings import (
    DEFAULT_MAX_MQTT_PAYLOAD_BYTES,
    DEFAULT_MAX_UPLOAD_BYTES,
    ServeOptions,
    Settings,
    parse_size,
)

__all__ = ["Security", "Size", "build_settings", "parse_size"]


@dataclass(frozen=True)
class Security:
    """The TLS, broker-credential and size-limit options of ``jetfleet serve``."""

    tls_cert: Path | None = None
    tls_key: Path | None = None
    broker_ca: Path | None = None
    broker_cert: Path | None = None
    broker_key: Path | None = None
    broker_user: str | None = None
    broker_password_file: Path | None = None
    max_upload: int = DEFAULT_MAX_UPLOAD_BYTES
    max_mqtt_payload: int = DEFAULT_MAX_MQTT_PAYLOAD_BYTES


def build_settings(
    db_url: str | None,
    broker_url: str | None,
    http: str,
    data_dir: Path | None,
    auto_migrate: bool,
    embedded: str,
    public_url: str | None,
    topic_prefix: str,
    security: Security | None = None,
) -> Settings:
    """The settings of ``jetfleet serve``'s main options; click errors name a bad option."""
    given: dict[str, Any] = {
        "db_url": db_url,
        "broker_url": broker_url,
        "http": http,
        "data_dir": data_dir,
        "auto_migrate": auto_migrate,
        "embedded": embedded,
        "public_url": public_url,
        "topic_prefix": topic_prefix,
        **asdict(security or Security()),
    }
    try:
        return ServeOptions.from_sources(given, {}).resolve()
    except ControllerError as exc:
        raise as_click_error(exc) from exc
