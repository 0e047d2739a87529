"""``jetfleet serve``'s options become the controller's :class:`~controller.settings.Settings`.

Sizes (``2G``, ``512MiB``) parse with :func:`parse_size`; :class:`Security` gathers the TLS,
broker-credential and size-limit options; :func:`build_settings` and
:func:`object_store_settings` check the options against each other (one usage error naming them)
and build the settings the command in :mod:`controller.cli.serve` runs the controller with.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import click

from controller.settings import (
    DEFAULT_MAX_MQTT_PAYLOAD_BYTES,
    DEFAULT_MAX_UPLOAD_BYTES,
    ObjectStoreSettings,
    S3Addressing,
    Settings,
    default_data_dir,
    default_db_url,
    parse_artifact_store,
    parse_broker_url,
    parse_host_port,
)
from shared.topics import TopicError, Topics
from shared.transport import MqttAuth

_SIZE = re.compile(r"(?P<n>\d+)\s*(?P<unit>B?|[KMGT]i?B?)", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(text: str) -> int:
    """``2G``, ``512MiB``, ``64k`` or plain bytes → bytes (binary units); ValueError otherwise."""
    match = _SIZE.fullmatch(text.strip())
    if match is None or int(match["n"]) == 0:
        raise ValueError(f"expected a positive size like 2G, 512M or 1048576, got {text!r}")
    return int(match["n"]) * _UNITS[match["unit"][:1].lower()]


class Size(click.ParamType[int]):
    """A size option (``--max-upload 2G``): bytes, parsed by :func:`parse_size`."""

    name = "SIZE"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_size(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


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
    sec = security or Security()
    data = data_dir or default_data_dir()
    http_host, http_port = parse_host_port(http, "--http")
    broker_host, broker_port = parse_host_port(embedded, "--embedded-broker")
    if broker_url is not None:
        parse_broker_url(broker_url)
    try:
        Topics(topic_prefix)
    except TopicError as exc:
        raise click.BadParameter(str(exc), param_hint="--topic-prefix") from exc
    return Settings(
        db_url=db_url or default_db_url(data),
        broker_url=broker_url,
        data_dir=data,
        http_host=http_host,
        http_port=http_port,
        embedded_broker_host=broker_host,
        embedded_broker_port=broker_port,
        public_url=public_url,
        topic_prefix=topic_prefix,
        auto_migrate=auto_migrate,
        broker_auth=_broker_auth(broker_url, sec),
        tls_cert_file=sec.tls_cert,
        tls_key_file=sec.tls_key,
        max_upload_bytes=sec.max_upload,
        max_mqtt_payload_bytes=sec.max_mqtt_payload,
    )


def object_store_settings(
    url: str | None,
    endpoint: str | None,
    region: str | None,
    addressing: str,
    cache_bytes: int,
    redirect_s: int,
) -> ObjectStoreSettings | None:
    """The ``--artifact-store`` settings; the S3 options refused without it."""
    if url is None:
        given = endpoint or region or addressing != "auto" or redirect_s
        if given:
            raise click.UsageError(
                "--s3-endpoint/--s3-region/--s3-addressing/--artifact-redirect need "
                "--artifact-store s3://BUCKET"
            )
        return None
    bucket, prefix = parse_artifact_store(url)
    return ObjectStoreSettings(
        bucket=bucket,
        prefix=prefix,
        endpoint_url=endpoint,
        region=region,
        addressing=cast("S3Addressing", addressing),  # one of S3_ADDRESSING (click.Choice)
        cache_bytes=cache_bytes,
        redirect_s=redirect_s,
    )


def _broker_auth(broker_url: str | None, sec: Security) -> MqttAuth:
    """The controller's broker credential and TLS files; refuses options that cannot apply."""
    tls_files = (sec.broker_ca, sec.broker_cert, sec.broker_key)
    if any(tls_files) and not (broker_url or "").startswith("mqtts://"):
        raise click.UsageError("--broker-ca/--broker-cert/--broker-key need --broker mqtts://...")
    if (sec.broker_cert is None) != (sec.broker_key is None):
        raise click.UsageError("--broker-cert and --broker-key go together")
    if (sec.tls_cert is None) != (sec.tls_key is None):
        raise click.UsageError("--tls-cert and --tls-key go together")
    password = None
    if sec.broker_password_file is not None:
        if sec.broker_user is None:
            raise click.UsageError("--broker-password-file needs --broker-user")
        try:
            lines = sec.broker_password_file.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise click.BadParameter(
                f"cannot read {sec.broker_password_file}: {exc}",
                param_hint="--broker-password-file",
            ) from exc
        password = lines[0] if lines else ""
    return MqttAuth(
        username=sec.broker_user,
        password=password,
        ca_file=sec.broker_ca,
        cert_file=sec.broker_cert,
        key_file=sec.broker_key,
    )
