"""Settings of one controller process: one pydantic-settings tree and what it resolves into.

- :mod:`.serve_fields` / :mod:`.serve`: ``jetfleet serve``'s options, each field with its option,
  environment variable, type, default and help; controller/cli/serve_options.py makes the click
  options from them, :meth:`ServeOptions.resolve` the :class:`Settings`.
- :mod:`.environment`: the settings only environment variables set (``JETFLEET_HEALTH_<NAME>``,
  ``JETFLEET_RETENTION_RAW_HOURS``, ``JETFLEET_RETENTION_ROLLUP_DAYS``,
  ``JETFLEET_ROLLOUT_LEASE_TTL_S``, ``JETFLEET_INGEST_SESSION_EXPIRY_S``), read once with
  :func:`from_environment`.
- :mod:`.values`: the resolved :class:`Settings` the rest of the controller consumes.
- :mod:`.parsing`: the address, URL and size forms the options take.

A bad value stops the start with one line naming the option or the variable.
"""

from __future__ import annotations

from controller.settings.defaults import (
    DATA_DIR_ENV,
    DEFAULT_ANALYSIS_TIMEOUT_S,
    DEFAULT_ARTIFACT_CACHE_BYTES,
    DEFAULT_DATA_DIR,
    DEFAULT_EMBEDDED_BROKER,
    DEFAULT_HTTP,
    DEFAULT_INGEST_SESSION_EXPIRY_S,
    DEFAULT_MAX_MODEL_NODES,
    DEFAULT_MAX_MQTT_PAYLOAD_BYTES,
    DEFAULT_MAX_UPLOAD_BYTES,
    DEFAULT_REFERENCE_TIMEOUT_S,
    DEFAULT_RETENTION_RAW_S,
    DEFAULT_RETENTION_ROLLUP_S,
    DEFAULT_ROLLOUT_LEASE_TTL_S,
    HEALTH_ENV_PREFIX,
    INGEST_SESSION_EXPIRY_ENV,
    REPLICA_ID_ENV,
    RETENTION_RAW_ENV,
    RETENTION_ROLLUP_ENV,
    ROLLOUT_LEASE_TTL_ENV,
    S3_ADDRESSING,
    S3Addressing,
)
from controller.settings.environment import EnvironmentSettings, HealthThresholds
from controller.settings.parsing import (
    check_replica_id,
    parse_artifact_store,
    parse_broker_url,
    parse_host_port,
    parse_size,
    parse_trusted_proxy,
)
from controller.settings.serve import ServeOptions
from controller.settings.source import BadOption, Opt, OptionConflict
from controller.settings.values import (
    ObjectStoreSettings,
    Settings,
    default_data_dir,
    default_db_url,
    from_environment,
)

__all__ = [
    "DATA_DIR_ENV",
    "DEFAULT_ANALYSIS_TIMEOUT_S",
    "DEFAULT_ARTIFACT_CACHE_BYTES",
    "DEFAULT_DATA_DIR",
    "DEFAULT_EMBEDDED_BROKER",
    "DEFAULT_HTTP",
    "DEFAULT_INGEST_SESSION_EXPIRY_S",
    "DEFAULT_MAX_MODEL_NODES",
    "DEFAULT_MAX_MQTT_PAYLOAD_BYTES",
    "DEFAULT_MAX_UPLOAD_BYTES",
    "DEFAULT_REFERENCE_TIMEOUT_S",
    "DEFAULT_RETENTION_RAW_S",
    "DEFAULT_RETENTION_ROLLUP_S",
    "DEFAULT_ROLLOUT_LEASE_TTL_S",
    "HEALTH_ENV_PREFIX",
    "INGEST_SESSION_EXPIRY_ENV",
    "REPLICA_ID_ENV",
    "RETENTION_RAW_ENV",
    "RETENTION_ROLLUP_ENV",
    "ROLLOUT_LEASE_TTL_ENV",
    "S3_ADDRESSING",
    "BadOption",
    "EnvironmentSettings",
    "HealthThresholds",
    "ObjectStoreSettings",
    "Opt",
    "OptionConflict",
    "S3Addressing",
    "ServeOptions",
    "Settings",
    "check_replica_id",
    "default_data_dir",
    "default_db_url",
    "from_environment",
    "parse_artifact_store",
    "parse_broker_url",
    "parse_host_port",
    "parse_size",
    "parse_trusted_proxy",
]
