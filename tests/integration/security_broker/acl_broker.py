"""A Mosquitto started with the configuration ``jetfleet broker config`` writes, on a free port,
and MQTT peers that log in with a credential and record what the broker did to them."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import paho.mqtt.client as mqtt
from click.testing import CliRunner
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from controller.broker_admin.acl import device_of_username
from controller.cli.main import cli
from shared.transport import agent_client_id
from tests.integration.controller.conftest import poll
from tests.ports import free_port


class AclMosquitto:
    """``mosquitto -c <generated mosquitto.conf>``; stopped by pid."""

    def __init__(self, directory: Path, prefix: str) -> None:
        self.directory = directory
        self.port = free_port()
        self.url = f"mqtt://127.0.0.1:{self.port}"
        self.log_path = directory / "mosquitto.log"
        args = [
            "broker",
            "config",
            "--out",
            str(directory),
            "--listener",
            f"127.0.0.1:{self.port}",
            "--topic-prefix",
            prefix,
            "--json",
        ]
        if os.geteuid() == 0:  # Mosquitto would drop to its own user, who cannot write here
            args += ["--user", "root"]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        written = json.loads(result.output)
        self.conf_file = Path(written["conf_file"])
        self.controller_user = str(written["controller_user"])
        self.controller_password = Path(written["password_file"]).read_text().strip()
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> AclMosquitto:
        exe = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(
                [exe, "-c", str(self.conf_file)], stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 20
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"mosquitto exited: {self.log_path.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError as exc:
                if time.monotonic() > deadline:
                    log = self.log_path.read_text()
                    raise RuntimeError(f"mosquitto did not listen: {log}") from exc
                time.sleep(0.05)

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)


@dataclass
class Peer:
    """A paho client logged in as ``username``; records CONNACKs, disconnects, SUBACKs and
    messages. It does not reconnect by itself. A device's credential (``dev-<id>``) uses that
    device's agent client id unless ``client_id`` says otherwise: the broker binds them."""

    url: str
    username: str | None
    password: str | None
    client_id: str | None = None
    clean_session: bool = True
    bind_address: str = ""
    """The local address to connect from (``127.0.0.2``: another host, as the broker sees it)."""
    connacks: list[ReasonCode] = field(default_factory=list)
    disconnects: list[ReasonCode] = field(default_factory=list)
    subacks: dict[int, list[ReasonCode]] = field(default_factory=dict)
    messages: list[tuple[str, bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        if self.client_id is None:
            device = device_of_username(self.username or "")
            self.client_id = agent_client_id(device) if device else f"jftest-{uuid.uuid4().hex[:8]}"
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=self.client_id,
            protocol=mqtt.MQTTv311,
            clean_session=self.clean_session,
        )
        if self.username is not None:
            self.client.username_pw_set(self.username, self.password)
        self.client.reconnect_delay_set(min_delay=60, max_delay=60)
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.on_subscribe = self._on_subscribe
        self.client.on_message = self._on_message

    def _on_connect(
        self, _c: mqtt.Client, _u: object, _f: object, rc: ReasonCode, _p: Properties | None
    ) -> None:
        self.connacks.append(rc)

    def _on_disconnect(
        self, _c: mqtt.Client, _u: object, _f: object, rc: ReasonCode, _p: Properties | None
    ) -> None:
        self.disconnects.append(rc)

    def _on_subscribe(
        self, _c: mqtt.Client, _u: object, mid: int, rcs: list[ReasonCode], _p: object
    ) -> None:
        self.subacks[mid] = list(rcs)

    def _on_message(self, _c: mqtt.Client, _u: object, msg: mqtt.MQTTMessage) -> None:
        with self._lock:
            self.messages.append((msg.topic, bytes(msg.payload)))

    def connect(self) -> ReasonCode:
        """Connect and return the broker's CONNACK reason."""
        host, port = self.url.removeprefix("mqtt://").rsplit(":", 1)
        seen = len(self.connacks)
        self.client.connect(host, int(port), keepalive=30, bind_address=self.bind_address)
        self.client.loop_start()
        poll(lambda: len(self.connacks) > seen, what=f"CONNACK for {self.username}")
        return self.connacks[seen]

    def subscribe(self, topic: str) -> ReasonCode:
        """Subscribe and return the granted QoS or the refusal of the SUBACK."""
        result, mid = self.client.subscribe(topic, qos=1)
        assert result == mqtt.MQTT_ERR_SUCCESS
        poll(lambda: mid in self.subacks, what=f"SUBACK for {topic}")
        return self.subacks[mid][0]

    def publish(self, topic: str, payload: bytes, retain: bool = False) -> None:
        """Publish at QoS 1 and wait for the broker's PUBACK (given for refused topics too)."""
        info = self.client.publish(topic, payload, qos=1, retain=retain)
        info.wait_for_publish(10)
        assert info.is_published()

    def got(self, topic: str) -> list[bytes]:
        with self._lock:
            return [p for t, p in self.messages if t == topic]

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


REFUSED_LOGIN = {"Not authorized", "Bad user name or password"}
