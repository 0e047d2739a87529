"""How a program reaches the broker: the URL forms and the credentials/TLS files.

``mqtt://host[:port]`` is plain TCP (port 1883 by default); ``mqtts://host[:port]`` is TLS (port
8883 by default), verified against ``ca_file`` or, without one, the system's CA store. A client
certificate (``cert_file`` + ``key_file``) is optional. Pure: the MQTT adapters
(agent.link.mqtt_link,
controller.mqtt_bus) turn this into paho calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

AGENT_CLIENT_ID_PREFIX = "jetfleet-agent-"


def agent_client_id(device_id: str) -> str:
    """The MQTT client id of a gateway's agent: the only one its broker credential may use."""
    return AGENT_CLIENT_ID_PREFIX + device_id


MQTT_PORT = 1883
MQTTS_PORT = 8883


@dataclass(frozen=True)
class BrokerAddress:
    host: str
    port: int
    tls: bool


@dataclass(frozen=True)
class MqttAuth:
    """Credentials and TLS material for one MQTT client; every part optional."""

    username: str | None = None
    password: str | None = None
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("a client certificate needs both cert_file and key_file")
        if self.password is not None and self.username is None:
            raise ValueError("a broker password needs a username")

    def __repr__(self) -> str:  # never print the password
        secret = "***" if self.password is not None else None
        return (
            f"MqttAuth(username={self.username!r}, password={secret!r}, "
            f"ca_file={self.ca_file!r}, cert_file={self.cert_file!r}, key_file={self.key_file!r})"
        )


def parse_broker_url(url: str) -> BrokerAddress:
    """``mqtt://host[:port]`` or ``mqtts://host[:port]``; ValueError names what is wrong."""
    parts = urlsplit(url)
    if parts.scheme not in ("mqtt", "mqtts") or not parts.hostname:
        raise ValueError(f"expected mqtt://host:port or mqtts://host:port, got {url!r}")
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"bad port in {url!r}") from exc
    tls = parts.scheme == "mqtts"
    return BrokerAddress(parts.hostname, port or (MQTTS_PORT if tls else MQTT_PORT), tls)
