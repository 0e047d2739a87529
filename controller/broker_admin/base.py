"""The interface the enrolment service uses to give and take broker access.

Three adapters, chosen by ``Settings.broker_admin``:

- ``none``: the controller manages no broker credentials (an anonymous broker, the demo);
  enrolment hands out no broker credential and revocation only revokes the API token.
- ``dynsec``: Mosquitto's dynamic security plugin, over MQTT (:mod:`.dynsec`).
- ``embedded``: the in-process amqtt broker, which checks logins against the enrolled
  identities in the database and kicks revoked devices (:mod:`.embedded`).
"""

from __future__ import annotations

from typing import Literal, Protocol

BrokerAdminKind = Literal["none", "dynsec", "embedded"]


class BrokerAdmin(Protocol):
    """Adds and removes one device's broker credential; every call takes effect at once."""

    manages_credentials: bool
    """False when the broker has no per-device credentials (``none``)."""

    def add_device(self, device_id: str, username: str, password: str) -> None:
        """Create ``username`` with ``password``, allowed only ``device_id``'s topics."""

    def remove_device(self, device_id: str, username: str) -> None:
        """Delete ``username``: a connected client is disconnected and cannot reconnect."""

    def bind_client_ids(self, devices: list[tuple[str, str]]) -> None:
        """Let each ``(device id, username)``'s credential log in only with that device's agent
        client id (credentials made before ids were bound get it at controller start)."""

    def ping(self) -> None:
        """Check that the broker answers admin requests; BusError with what to do if not."""


class NoBrokerAdmin:
    """``none``: the broker is not managed (anonymous or configured by hand)."""

    manages_credentials = False

    def add_device(self, device_id: str, username: str, password: str) -> None:
        return None

    def remove_device(self, device_id: str, username: str) -> None:
        return None

    def bind_client_ids(self, devices: list[tuple[str, str]]) -> None:
        return None

    def ping(self) -> None:
        return None


def choose_admin(choice: str, external_broker: bool) -> BrokerAdminKind:
    """``--broker-admin``'s value: ``auto`` is ``embedded`` for the embedded broker (logins and
    ACLs enforced) and ``none`` for an external one (configure ``dynsec`` explicitly)."""
    if choice == "auto":
        return "none" if external_broker else "embedded"
    if choice not in ("none", "dynsec", "embedded"):
        raise ValueError(f"unknown broker admin {choice!r}: use auto, none, dynsec or embedded")
    return choice  # type: ignore[return-value]
