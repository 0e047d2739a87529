"""``jetfleet serve``'s options checked, alone and against each other, and resolved into the
:class:`~controller.settings.values.Settings` the controller runs with.

The fields (option, variable, type, default, help) are :class:`ServeFields`; every check here
raises the one line the command shows, naming the option (and the variable a value came from).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError, field_validator, model_validator

from controller.errors import InvalidInput
from controller.settings.parsing import (
    check_replica_id,
    parse_artifact_store,
    parse_broker_url,
    parse_host_port,
    parse_trusted_proxy,
)
from controller.settings.serve_fields import ServeFields
from controller.settings.source import (
    BAD_OPTION,
    CONFLICT,
    INVALID,
    BadOption,
    OptEnvSource,
    one_line,
    refuse,
)
from controller.settings.values import (
    ObjectStoreSettings,
    Settings,
    default_data_dir,
    default_db_url,
)
from shared.topics import TopicError, Topics
from shared.transport import MqttAuth


def _checked(check: Callable[[str], object], value: str) -> None:
    try:
        check(value)
    except InvalidInput as exc:
        raise refuse(INVALID, str(exc)) from None


class ServeOptions(ServeFields):
    """The options of ``jetfleet serve``, each checked; :meth:`resolve` gives the settings."""

    @classmethod
    def from_sources(cls, given: Mapping[str, Any], env: Mapping[str, str]) -> ServeOptions:
        """The options ``given`` on the command line, else their variables in ``env``, else
        the defaults; :class:`InvalidInput` (or a subclass) names a bad one in one line."""
        from_env = {k: v for k, v in OptEnvSource(cls, env)().items() if k not in given}
        try:
            return cls(**from_env, **given)
        except ValidationError as exc:
            raise one_line(exc, cls, frozenset(from_env)) from None

    @field_validator("http", "embedded")
    @classmethod
    def _host_port(cls, value: str, info: Any) -> str:
        flag = "--http" if info.field_name == "http" else "--embedded-broker"
        _checked(lambda text: parse_host_port(text, flag), value)
        return value

    @field_validator("broker_url", "public_broker_url")
    @classmethod
    def _broker(cls, value: str | None) -> str | None:
        if value is not None:
            _checked(parse_broker_url, value)
        return value

    @field_validator("topic_prefix")
    @classmethod
    def _topic_prefix(cls, value: str) -> str:
        try:
            Topics(value)
        except TopicError as exc:
            raise refuse(BAD_OPTION, str(exc)) from None
        return value

    @field_validator("replica_id")
    @classmethod
    def _replica_id(cls, value: str | None) -> str | None:
        if value:
            _checked(check_replica_id, value)
        return value or None

    @field_validator("trusted_proxies")
    @classmethod
    def _trusted_proxies(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        try:
            return tuple(parse_trusted_proxy(p) for p in value)
        except InvalidInput as exc:
            raise refuse(INVALID, str(exc)) from None

    @field_validator("data_dir")
    @classmethod
    def _directory(cls, value: Path | None) -> Path | None:
        if value is not None and value.exists() and not value.is_dir():
            raise refuse(BAD_OPTION, f"Directory {str(value)!r} is a file.")
        return value

    @field_validator("artifact_store")
    @classmethod
    def _artifact_store(cls, value: str | None) -> str | None:
        if value is not None:
            _checked(parse_artifact_store, value)
        return value

    @model_validator(mode="after")
    def _together(self) -> ServeOptions:
        """Options that cannot apply without others, in the order the command checked them."""
        tls_files = (self.broker_ca, self.broker_cert, self.broker_key)
        if any(tls_files) and not (self.broker_url or "").startswith("mqtts://"):
            raise refuse(
                CONFLICT, "--broker-ca/--broker-cert/--broker-key need --broker mqtts://..."
            )
        if (self.broker_cert is None) != (self.broker_key is None):
            raise refuse(CONFLICT, "--broker-cert and --broker-key go together")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise refuse(CONFLICT, "--tls-cert and --tls-key go together")
        if self.broker_password_file is not None and self.broker_user is None:
            raise refuse(CONFLICT, "--broker-password-file needs --broker-user")
        s3 = self.s3_endpoint or self.s3_region or self.s3_addressing != "auto"
        if self.artifact_store is None and (s3 or self.artifact_redirect_s):
            raise refuse(
                CONFLICT,
                "--s3-endpoint/--s3-region/--s3-addressing/--artifact-redirect need "
                "--artifact-store s3://BUCKET",
            )
        return self

    def resolve(self) -> Settings:
        """The settings these options give (``--broker-admin auto`` left to the caller, which
        knows the broker admins: ``broker_admin`` is ``none`` here); reads the broker password
        file, :class:`BadOption` when it cannot."""
        data = self.data_dir or default_data_dir()
        http_host, http_port = parse_host_port(self.http, "--http")
        broker_host, broker_port = parse_host_port(self.embedded, "--embedded-broker")
        return Settings(
            db_url=self.db_url or default_db_url(data),
            broker_url=self.broker_url,
            data_dir=data,
            http_host=http_host,
            http_port=http_port,
            embedded_broker_host=broker_host,
            embedded_broker_port=broker_port,
            public_url=self.public_url,
            topic_prefix=self.topic_prefix,
            auto_migrate=self.auto_migrate,
            broker_auth=MqttAuth(
                username=self.broker_user,
                password=_password(self.broker_password_file),
                ca_file=self.broker_ca,
                cert_file=self.broker_cert,
                key_file=self.broker_key,
            ),
            public_broker_url=self.public_broker_url,
            auth_required=not self.insecure_no_auth,
            tls_cert_file=self.tls_cert,
            tls_key_file=self.tls_key,
            object_store=self._object_store(),
            max_upload_bytes=self.max_upload,
            max_mqtt_payload_bytes=self.max_mqtt_payload,
            max_model_nodes=self.max_model_nodes,
            analysis_timeout_s=self.analysis_timeout_s,
            reference_timeout_s=self.reference_timeout_s,
            ingest_workers=self.ingest_workers,
            trusted_proxies=self.trusted_proxies,
            replica_id=self.replica_id,
        )

    def _object_store(self) -> ObjectStoreSettings | None:
        if self.artifact_store is None:
            return None
        bucket, prefix = parse_artifact_store(self.artifact_store)
        return ObjectStoreSettings(
            bucket=bucket,
            prefix=prefix,
            endpoint_url=self.s3_endpoint,
            region=self.s3_region,
            addressing=self.s3_addressing,
            cache_bytes=self.artifact_cache,
            redirect_s=self.artifact_redirect_s,
        )


def _password(path: Path | None) -> str | None:
    """The first line of ``--broker-password-file``."""
    if path is None:
        return None
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadOption(f"cannot read {path}: {exc}", "--broker-password-file") from exc
    return lines[0] if lines else ""
