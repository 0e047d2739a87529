"""The Mosquitto configuration Jetfleet needs: ``mosquitto.conf`` and the initial dynamic
security file holding the controller's client, its role and the shared device role.

Rendering is pure; :func:`write_broker_config` writes the files (the dynamic security file and
the controller's password 0600) and refuses to overwrite a dynamic security file, which by
then holds every enrolled device.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.broker_admin.acl import (
    CONTROLLER_ROLE,
    DEVICE_USERNAME_PREFIX,
    SHARED_DEVICE_ACLS,
    SHARED_DEVICE_ROLE,
    controller_acls,
)
from controller.broker_admin.passwords import PasswordHash, hash_password, new_password
from controller.errors import InvalidInput

PLUGIN_NAME = "mosquitto_dynamic_security.so"
PLUGIN_GLOBS = (
    f"/usr/lib/*/{PLUGIN_NAME}",
    f"/usr/lib/{PLUGIN_NAME}",
    f"/usr/lib/mosquitto/{PLUGIN_NAME}",
    f"/usr/local/lib/{PLUGIN_NAME}",
    f"/usr/local/lib/*/{PLUGIN_NAME}",
)
DEFAULT_MAX_PACKET_BYTES = 1024 * 1024
CONF_NAME = "mosquitto.conf"
DYNSEC_NAME = "dynamic-security.json"
PASSWORD_NAME = "controller-password"  # noqa: S105 - a file name


MAX_QUEUED_MESSAGES = 500_000
"""Per client, above those in flight: the ingest sessions' backlog while a replica is down."""


@dataclass(frozen=True)
class BrokerConfig:
    """What the generated configuration says."""

    controller_user: str
    plugin_path: Path
    dynsec_file: Path
    """Absolute path of the dynamic security file, as written into ``mosquitto.conf``."""
    topic_prefix: str
    listener: tuple[str, int] = ("0.0.0.0", 1883)
    tls_listener: tuple[str, int] | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_ca: Path | None = None
    """CA of client certificates (optional; clients still log in with a password)."""
    max_packet_bytes: int = DEFAULT_MAX_PACKET_BYTES
    run_as_user: str | None = None
    """``user`` line: whom Mosquitto runs as when started as root (it must be able to write
    the dynamic security file's directory)."""

    def __post_init__(self) -> None:
        if self.controller_user.startswith(DEVICE_USERNAME_PREFIX):
            raise InvalidInput(
                f"--controller-user must not start with {DEVICE_USERNAME_PREFIX!r} "
                "(device user names do)"
            )
        if (self.tls_cert is None) != (self.tls_key is None):
            raise InvalidInput("give both --tls-cert and --tls-key, or neither")
        if self.max_packet_bytes < 1024:
            raise InvalidInput("--max-packet-size must be at least 1024 bytes")


def find_dynsec_plugin() -> Path | None:
    """Where this machine's Mosquitto keeps its dynamic security plugin, if installed."""
    for pattern in PLUGIN_GLOBS:
        found = sorted(glob.glob(pattern))
        if found:
            return Path(found[0])
    return None


def render_mosquitto_conf(config: BrokerConfig) -> str:
    """``mosquitto.conf`` text (Mosquitto 2.0)."""
    lines = [
        "# Written by `jetfleet broker config`: authentication and topic ACLs by the dynamic",
        "# security plugin; the Jetfleet controller adds and removes device clients at run time.",
        "per_listener_settings false",
        "allow_anonymous false",
        f"max_packet_size {config.max_packet_bytes}",
        "# The controller's telemetry ingest keeps persistent sessions: what gateways send while a",
        "# controller replica restarts waits here for it. Mosquitto's default of 1,000 queued",
        "# messages per client is 3 s of 10,000 gateways at one sample per 30 s; this is ~25 min.",
        f"max_queued_messages {MAX_QUEUED_MESSAGES}",
        f"plugin {config.plugin_path}",
        f"plugin_opt_config_file {config.dynsec_file}",
    ]
    if config.run_as_user:
        lines.append(f"user {config.run_as_user}")
    host, port = config.listener
    lines += ["", f"listener {port} {host}"]
    if config.tls_cert is not None and config.tls_key is not None:
        tls_host, tls_port = config.tls_listener or ("0.0.0.0", 8883)
        lines += [
            "",
            f"listener {tls_port} {tls_host}",
            f"certfile {config.tls_cert}",
            f"keyfile {config.tls_key}",
        ]
        if config.tls_ca is not None:
            lines.append(f"cafile {config.tls_ca}")
    return "\n".join(lines) + "\n"


def render_dynsec(config: BrokerConfig, password: PasswordHash) -> dict[str, Any]:
    """The initial dynamic security document: default deny, the controller, the device role."""
    return {
        "clients": [
            {
                "username": config.controller_user,
                "textName": "Jetfleet controller",
                "password": password.password,
                "salt": password.salt,
                "iterations": password.iterations,
                "roles": [{"rolename": CONTROLLER_ROLE}],
            }
        ],
        "groups": [],
        "roles": [
            {"rolename": CONTROLLER_ROLE, "acls": controller_acls(config.topic_prefix)},
            {"rolename": SHARED_DEVICE_ROLE, "acls": SHARED_DEVICE_ACLS},
        ],
        "defaultACLAccess": {
            "publishClientSend": False,
            "publishClientReceive": False,
            "subscribe": False,
            "unsubscribe": False,
        },
    }


@dataclass(frozen=True)
class WrittenConfig:
    conf_file: Path
    dynsec_file: Path
    password_file: Path


def write_broker_config(
    out_dir: Path, config: BrokerConfig, *, force: bool = False
) -> WrittenConfig:
    """Write ``mosquitto.conf``, the dynamic security file and the controller's password."""
    out_dir.mkdir(parents=True, exist_ok=True)
    conf_file = out_dir / CONF_NAME
    password_file = out_dir / PASSWORD_NAME
    if config.dynsec_file.exists() and not force:
        raise InvalidInput(
            f"{config.dynsec_file} exists and holds the enrolled devices; move it away or "
            "pass --force to start over (every device must enrol again)"
        )
    password = new_password()
    document = render_dynsec(config, hash_password(password))
    _write_private(config.dynsec_file, json.dumps(document, indent=2) + "\n")
    _write_private(password_file, password + "\n")
    conf_file.write_text(render_mosquitto_conf(config), encoding="utf-8")
    return WrittenConfig(conf_file, config.dynsec_file, password_file)


def _write_private(path: Path, text: str) -> None:
    """Create ``path`` readable by its owner only, replacing any previous file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
