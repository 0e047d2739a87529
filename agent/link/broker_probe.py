"""The doctor's broker probe: connect as the agent would (TCP, TLS, MQTT CONNECT), say what failed.

Without paho (only :mod:`agent.link.mqtt_link` imports it): one MQTT 3.1.1 CONNECT with the agent's
credentials under a client id of its own (so a running agent's session is left alone), one
CONNACK, one DISCONNECT. Waiting for the CONNACK is what makes a broker's refusal visible: with
TLS 1.3 a broker rejects a missing client certificate only after the handshake completed.
:func:`connect_packet` and :func:`read_connack` are pure; :func:`probe_broker` does the I/O.
"""

from __future__ import annotations

import socket
import ssl
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from shared import mqtt_wire
from shared.mqtt_wire import CONNACK_REFUSALS
from shared.transport import MqttAuth

Problem = Literal[
    "tls_files", "tls_verify", "tls_handshake", "tls_session", "refused", "not_mqtt", "unreachable"
]


@dataclass(frozen=True)
class BrokerAnswer:
    """What the probe found: ``problem`` None when the broker accepted the connection."""

    problem: Problem | None = None
    detail: str = ""
    tls: bool = False


def connect_packet(
    client_id: str, username: str | None = None, password: str | None = None
) -> bytes:
    """An MQTT 3.1.1 CONNECT (clean session, keepalive 10 s) with optional credentials."""
    return mqtt_wire.connect_packet(client_id, 10, MqttAuth(username, password))


def read_connack(reply: bytes) -> BrokerAnswer:
    """The verdict of a CONNACK (or of what came instead of one)."""
    if len(reply) < 4:
        return BrokerAnswer(
            "not_mqtt", "the broker closed the connection without answering the MQTT CONNECT"
        )
    if reply[0] != 0x20 or reply[1] != 2:
        return BrokerAnswer("not_mqtt", f"the answer is not an MQTT CONNACK ({reply[:4].hex()})")
    code = reply[3]
    if code == 0:
        return BrokerAnswer()
    reason = CONNACK_REFUSALS.get(code, f"return code {code}")
    return BrokerAnswer("refused", f"the broker refused the connection: {reason}")


def _tls_context(auth: MqttAuth) -> ssl.SSLContext | BrokerAnswer:
    files = (
        (auth.ca_file, "broker_ca_file"),
        (auth.cert_file, "broker_cert_file"),
        (auth.key_file, "broker_key_file"),
    )
    for path, key in files:
        if path is not None and not Path(path).is_file():
            return BrokerAnswer("tls_files", f"{key} {path} not found", tls=True)
    try:
        context = ssl.create_default_context(cafile=str(auth.ca_file) if auth.ca_file else None)
        if auth.cert_file is not None and auth.key_file is not None:
            context.load_cert_chain(auth.cert_file, auth.key_file)
    except ssl.SSLError as exc:
        return BrokerAnswer(
            "tls_files", f"unusable TLS files ({exc.reason or exc}): {_names(auth)}", tls=True
        )
    except OSError as exc:
        return BrokerAnswer("tls_files", f"cannot read TLS files: {exc}", tls=True)
    return context


def _names(auth: MqttAuth) -> str:
    given = [str(p) for p in (auth.ca_file, auth.cert_file, auth.key_file) if p is not None]
    return ", ".join(given) or "the system CA store"


def _recv(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def probe_broker(
    host: str,
    port: int,
    tls: bool,
    auth: MqttAuth,
    timeout_s: float = 3.0,
    client_id: str | None = None,
) -> BrokerAnswer:
    """Connect to ``host:port`` with ``auth`` (TLS when ``tls``) and read the CONNACK.

    ``client_id`` defaults to a random ``jetfleet-doctor-...``; a device's credential works only
    with its agent's client id (the broker binds them), which takes the running agent's
    session over for a moment: the agent reconnects by itself."""
    context: ssl.SSLContext | None = None
    if tls:
        made = _tls_context(auth)
        if isinstance(made, BrokerAnswer):
            return made
        context = made
    try:
        raw = socket.create_connection((host, port), timeout=timeout_s)
    except OSError as exc:
        return BrokerAnswer("unreachable", str(exc) or type(exc).__name__, tls=tls)
    with raw:
        if context is None:
            return _session(raw, auth, tls=False, client_id=client_id)
        try:
            sock = context.wrap_socket(raw, server_hostname=host)
        except ssl.SSLCertVerificationError as exc:
            return BrokerAnswer("tls_verify", exc.verify_message or str(exc), tls=True)
        except ssl.SSLError as exc:
            return BrokerAnswer("tls_handshake", exc.reason or str(exc), tls=True)
        except OSError as exc:
            return BrokerAnswer("tls_handshake", str(exc), tls=True)
        with sock:
            return _session(sock, auth, tls=True, client_id=client_id)


def _session(
    sock: socket.socket, auth: MqttAuth, tls: bool, client_id: str | None = None
) -> BrokerAnswer:
    """CONNECT, CONNACK, DISCONNECT on an open connection."""
    client_id = client_id or f"jetfleet-doctor-{uuid.uuid4().hex[:12]}"
    try:
        sock.sendall(connect_packet(client_id, auth.username, auth.password))
        reply = _recv(sock, 4)
        if reply[:1] == b"\x20":
            sock.sendall(b"\xe0\x00")
    except OSError as exc:
        reply = b""
        reason = (exc.reason if isinstance(exc, ssl.SSLError) else None) or str(exc)
    else:
        reason = "no answer"
    if tls and len(reply) < 4:
        return BrokerAnswer(
            "tls_session",
            f"the broker ended the TLS session before answering the MQTT CONNECT ({reason})",
            tls=True,
        )
    answer = read_connack(reply)
    return BrokerAnswer(answer.problem, answer.detail, tls=tls)
