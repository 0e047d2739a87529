"""The bench's own Mosquitto: ``jetfleet broker config``'s configuration (dynamic security,
per-device ACLs), sized for ten thousand devices, with every device's credential in place.

Credentials in bulk (said so in the results): enrolment is rate limited per client address
(10 at once, then 10 a minute: :mod:`controller.trust.enrolment_rate`) and, with 10,000
clients, Mosquitto 2.0's dynamic security plugin rewrites its whole file (10 MB) at every
command, about 0.2 s each, five commands per enrolment. So the bench writes the plugin's file
before the broker starts, with what ``createClient`` would leave in it for each device (its
password hashed the way Mosquitto hashes it, PBKDF2-SHA512 with its default 101 iterations;
the device's own role with its literal topics; the shared device role; its agent client id),
and stores the matching identity rows (:mod:`bench.scale.fleet_db`).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.scale.gateways import Credential
from controller.broker_admin.acl import (
    SHARED_DEVICE_ROLE,
    device_acls,
    device_role,
    device_username,
)
from controller.broker_admin.mosquitto_config import (
    BrokerConfig,
    find_dynsec_plugin,
    render_dynsec,
    render_mosquitto_conf,
)
from controller.broker_admin.passwords import PasswordHash, hash_password, new_password
from controller.demo.ports import free_port
from shared.transport import agent_client_id

MOSQUITTO_ITERATIONS = 101
"""What Mosquitto 2.0's dynamic security plugin uses when ``createClient`` gets a password."""

CONTROLLER_USER = "jetfleet-controller"

SIZING = """
# Sized for ten thousand devices and three controller replicas (bench/scale), beside the
# generated max_queued_messages: each replica's client receives every device's reported state
# and status, so its queue holds a whole fleet's burst.
max_queued_bytes 0
max_inflight_messages 100
max_connections -1
set_tcp_nodelay true
persistence false
connection_messages false
log_type error
log_type warning
"""


@dataclass(frozen=True)
class DeviceSecret:
    """A device's credential and the hash the broker and the identity row keep."""

    cred: Credential
    hashed: PasswordHash


def device_secrets(device_ids: list[str]) -> list[DeviceSecret]:
    """A fresh password for each device, hashed as Mosquitto hashes it."""
    out = []
    for device_id in device_ids:
        password = new_password()
        out.append(
            DeviceSecret(
                Credential(device_id, device_username(device_id), password),
                hash_password(password, MOSQUITTO_ITERATIONS),
            )
        )
    return out


def dynsec_document(
    config: BrokerConfig, controller: PasswordHash, devices: list[DeviceSecret]
) -> dict[str, Any]:
    """The plugin's file: ``jetfleet broker config``'s, plus one client and role per device."""
    doc = render_dynsec(config, controller)
    for d in devices:
        device_id = d.cred.device_id
        doc["clients"].append(
            {
                "username": d.cred.username,
                "textName": f"Jetfleet device {device_id}",
                "clientid": agent_client_id(device_id),
                "password": d.hashed.password,
                "salt": d.hashed.salt,
                "iterations": d.hashed.iterations,
                "roles": [{"rolename": device_role(device_id)}, {"rolename": SHARED_DEVICE_ROLE}],
            }
        )
        doc["roles"].append(
            {
                "rolename": device_role(device_id),
                "acls": device_acls(device_id, config.topic_prefix),
            }
        )
    return doc


class ScaleBroker:
    """Mosquitto with dynamic security on a free port; started and stopped by pid."""

    def __init__(self, work: Path, prefix: str, devices: list[DeviceSecret]) -> None:
        plugin = find_dynsec_plugin()
        if plugin is None:
            raise SystemExit(
                "the scale bench needs Mosquitto's dynamic security plugin: "
                "apt-get install mosquitto"
            )
        self.dir = work / "mosquitto"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.controller_password = new_password()
        self.password_file = self.dir / "controller-password"
        self.password_file.write_text(self.controller_password + "\n")
        os.chmod(self.password_file, 0o600)
        config = BrokerConfig(
            controller_user=CONTROLLER_USER,
            plugin_path=plugin,
            dynsec_file=self.dir / "dynamic-security.json",
            topic_prefix=prefix,
            listener=("127.0.0.1", self.port),
            run_as_user="root" if os.geteuid() == 0 else None,
        )
        document = dynsec_document(config, hash_password(self.controller_password), devices)
        config.dynsec_file.write_text(json.dumps(document))
        self.conf = self.dir / "mosquitto.conf"
        self.conf.write_text(render_mosquitto_conf(config) + SIZING)
        self.log = work / "logs" / "mosquitto.log"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def start(self, timeout: float = 60.0) -> None:
        exe = "/usr/sbin/mosquitto" if os.path.exists("/usr/sbin/mosquitto") else "mosquitto"
        with self.log.open("ab") as fh:
            self.proc = subprocess.Popen(
                [exe, "-c", str(self.conf)],
                stdout=fh,
                stderr=subprocess.STDOUT,
                preexec_fn=_open_files_to_hard_limit,
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"mosquitto exited: {self.log.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("mosquitto did not listen within 60 s") from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _open_files_to_hard_limit() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
