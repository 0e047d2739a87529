"""Mosquitto's dynamic security plugin as a :class:`~controller.broker_admin.base.BrokerAdmin`.

Commands go as JSON to ``$CONTROL/dynamic-security/v1``; the plugin answers on
``.../response`` with one entry per command, carrying back our ``correlationData``. Deleting a
client disconnects it at once (Mosquitto logs "disconnected by administrative action") and
its credential stops working, so revocation needs nothing more. Mosquitto 2.0 has no ``%u``
substitution in dynamic security ACLs, so each device gets its own role with literal topics
(:func:`controller.broker_admin.acl.device_acls`), plus the shared ``jetfleet-device`` role.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from controller.broker_admin.acl import (
    DYNSEC_RESPONSE_TOPIC,
    DYNSEC_TOPIC,
    SHARED_DEVICE_ACLS,
    SHARED_DEVICE_ROLE,
    device_acls,
    device_role,
)
from controller.errors import BusError
from controller.mqtt_bus import apply_auth
from controller.settings import parse_broker_url
from shared.transport import MqttAuth, agent_client_id

logger = logging.getLogger(__name__)

_NOT_FOUND = ("Client not found", "Role not found")
_EXISTS = ("Role already exists",)


class DynsecError(BusError):
    """The plugin refused a command, or did not answer in time."""


class DynsecAdmin:
    """A paho client of its own, logged in with the controller's credential (admin role)."""

    manages_credentials = True

    def __init__(
        self, broker_url: str, auth: MqttAuth, prefix: str, timeout_s: float = 10.0
    ) -> None:
        self.broker_url = broker_url
        self._host, self._port = parse_broker_url(broker_url)
        self._prefix = prefix
        self._timeout = timeout_s
        self._connected = threading.Event()
        self._refused: str | None = None
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[threading.Event, list[dict[str, Any]]]] = {}
        self._started = False
        self._client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=f"jetfleet-dynsec-{uuid.uuid4().hex[:12]}",
            protocol=mqtt.MQTTv311,
            clean_session=True,
        )
        apply_auth(self._client, auth, tls=broker_url.startswith("mqtts://"))
        self._client.reconnect_delay_set(min_delay=1, max_delay=30)
        self._client.on_connect = self._handle_connect
        self._client.on_disconnect = self._handle_disconnect
        self._client.on_message = self._handle_message

    def start(self) -> None:
        """Connect the first time, then wait until connected (paho reconnects by itself);
        :class:`BusError` naming the cause when that does not happen in time."""
        with self._lock:
            if not self._started:
                try:
                    self._client.connect_async(self._host, self._port, keepalive=30)
                except (OSError, ValueError) as exc:
                    raise BusError(
                        f"cannot reach the MQTT broker at {self.broker_url}: {exc}"
                    ) from exc
                self._client.loop_start()
                self._started = True
        self._wait_connected()

    def stop(self) -> None:
        """Disconnect and stop the network thread."""
        with self._lock:
            if not self._started:
                return
            self._started = False
        self._client.disconnect()
        self._client.loop_stop()
        self._connected.clear()

    def add_device(self, device_id: str, username: str, password: str) -> None:
        role = device_role(device_id)
        self._run(
            [
                {
                    "command": "createRole",
                    "rolename": SHARED_DEVICE_ROLE,
                    "acls": SHARED_DEVICE_ACLS,
                },
                {"command": "deleteClient", "username": username},
                {"command": "deleteRole", "rolename": role},
                {
                    "command": "createRole",
                    "rolename": role,
                    "acls": device_acls(device_id, self._prefix),
                },
                {
                    "command": "createClient",
                    "username": username,
                    "password": password,
                    "textname": f"Jetfleet device {device_id}",
                    "clientid": agent_client_id(device_id),
                    "roles": [{"rolename": role}, {"rolename": SHARED_DEVICE_ROLE}],
                },
            ]
        )
        logger.info("broker credential %s created for device %s", username, device_id)

    def bind_client_ids(self, devices: list[tuple[str, str]]) -> None:
        """Set the client id of each credential that does not carry its device's id yet.

        Mosquitto disconnects a client at every ``setClientId``, even to the id it has, and
        rewrites its whole file per command: credentials already bound are left alone, so a
        controller start (every replica's) neither cuts the fleet off nor spends minutes
        rewriting the file. A credential the plugin does not know is left out (it logs in
        nowhere).
        """
        bound = self._client_ids()
        unbound = [(d, u) for d, u in devices if u in bound and bound[u] != agent_client_id(d)]
        for start in range(0, len(unbound), _BATCH):
            self._run(
                [
                    {"command": "setClientId", "username": u, "clientid": agent_client_id(d)}
                    for d, u in unbound[start : start + _BATCH]
                ]
            )

    def _client_ids(self) -> dict[str, str]:
        """Username → client id ("" when none) of every client the plugin has."""
        found: dict[str, str] = {}
        offset = 0
        while True:
            page = self._run(
                [{"command": "listClients", "verbose": True, "count": _PAGE, "offset": offset}]
            )
            data = page[0].get("data")
            clients = data.get("clients") if isinstance(data, dict) else None
            if not isinstance(clients, list) or not clients:
                return found
            for client in clients:
                if isinstance(client, dict) and isinstance(client.get("username"), str):
                    found[client["username"]] = str(client.get("clientid") or "")
            offset += len(clients)

    def remove_device(self, device_id: str, username: str) -> None:
        self._run(
            [
                {"command": "deleteClient", "username": username},
                {"command": "deleteRole", "rolename": device_role(device_id)},
            ]
        )
        logger.info("broker credential %s of device %s deleted", username, device_id)

    def ping(self) -> None:
        self._run([{"command": "getDefaultACLAccess"}])

    def client(self, username: str) -> dict[str, Any] | None:
        """The plugin's record of ``username`` (``getClient``); None when there is none."""
        responses = self._run([{"command": "getClient", "username": username}])
        data = responses[0].get("data")
        return data.get("client") if isinstance(data, dict) else None

    def _run(self, commands: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Send ``commands`` in one message and return the plugin's responses, in order.

        A "not found" answer to a delete and "already exists" to the shared role are expected
        (the calls are idempotent); any other error raises :class:`DynsecError`.
        """
        self.start()
        correlation = uuid.uuid4().hex
        tagged = [dict(c, correlationData=f"{correlation}-{i}") for i, c in enumerate(commands)]
        done = threading.Event()
        answers: list[dict[str, Any]] = []
        self._pending[correlation] = (done, answers)
        try:
            info = self._client.publish(DYNSEC_TOPIC, json.dumps({"commands": tagged}), qos=1)
            if not done.wait(self._timeout):
                raise DynsecError(
                    f"no answer from Mosquitto's dynamic security plugin at {self.broker_url} "
                    f"within {self._timeout:.0f} s (publish rc {info.rc}): is the plugin loaded "
                    "and does the controller's broker user hold the admin role? "
                    "(`jetfleet broker config` writes both)"
                )
        finally:
            self._pending.pop(correlation, None)
        by_tag = {str(a.get("correlationData")): a for a in answers}
        responses = []
        for i, command in enumerate(commands):
            answer = by_tag.get(f"{correlation}-{i}", {})
            error = answer.get("error")
            if error and not _expected(command["command"], str(error)):
                raise DynsecError(
                    f"Mosquitto's dynamic security plugin refused {command['command']}: {error}"
                )
            responses.append(answer)
        return responses

    def _wait_connected(self) -> None:
        if self._connected.wait(self._timeout):
            return
        reason = f" ({self._refused})" if self._refused else ""
        raise BusError(
            f"the controller's dynamic security client could not log in to {self.broker_url}"
            f"{reason}: check the controller's broker user and password"
        )

    def _handle_connect(
        self,
        client: mqtt.Client,
        _userdata: Any,
        _flags: mqtt.ConnectFlags,
        reason_code: ReasonCode,
        _properties: Properties | None,
    ) -> None:
        if reason_code.is_failure:
            self._refused = str(reason_code)
            logger.warning("broker %s refused the admin client: %s", self.broker_url, reason_code)
            return
        client.subscribe(DYNSEC_RESPONSE_TOPIC, qos=1)
        self._connected.set()

    def _handle_disconnect(
        self,
        _client: mqtt.Client,
        _userdata: Any,
        _flags: mqtt.DisconnectFlags,
        _reason_code: ReasonCode,
        _properties: Properties | None,
    ) -> None:
        self._connected.clear()

    def _handle_message(self, _client: mqtt.Client, _userdata: Any, msg: mqtt.MQTTMessage) -> None:
        try:
            body = json.loads(msg.payload)
            responses = body["responses"]
        except (ValueError, KeyError, TypeError):
            logger.warning("ignored a malformed dynamic security response on %s", msg.topic)
            return
        touched: set[str] = set()
        for answer in responses:
            tag = str(answer.get("correlationData", "")) if isinstance(answer, dict) else ""
            correlation = tag.rpartition("-")[0]
            pending = self._pending.get(correlation)
            if pending is not None:
                pending[1].append(answer)
                touched.add(correlation)
        for correlation in touched:
            pending = self._pending.get(correlation)
            if pending is not None:
                pending[0].set()


_BATCH = 200
"""Dynamic security commands per message when binding many clients at once."""
_PAGE = 5000
"""Clients per ``listClients`` answer (about 700 KB)."""


def _expected(command: str, error: str) -> bool:
    if command.startswith("delete"):
        return error in _NOT_FOUND
    return command == "createRole" and error in _EXISTS
