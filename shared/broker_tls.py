"""What both MQTT adapters share about TLS to the broker: failure explanations, a closing socket.

:func:`explain_connect_error` says why a connection failed, in one line that names the setting to
fix. paho reports a failed attempt in two ways: an exception raised by the TCP connect or the TLS
handshake (which the adapters read in ``on_connect_fail``), or, with TLS 1.3, a session the broker
drops after the handshake (a missing or refused client certificate) that paho only logs as
``failed to receive on socket: ...``. Both become the same kind of line here. The adapters pass
:class:`FixNames` naming their own settings (agent config keys, controller CLI options).

:class:`ClosingSSLSocket` closes itself when its handshake fails; paho drops such a socket without
closing it (a ``ResourceWarning`` per failed attempt). The adapters build their ``SSLContext`` and
set ``context.sslsocket_class`` to it. :func:`apply_auth` sets credentials and TLS on a paho
client through the two calls it needs, so paho itself is not imported here. No network access
here; building the TLS context reads the certificate and key files the adapters name.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from shared.transport import MqttAuth


@dataclass(frozen=True)
class FixNames:
    """How one program names the settings a TLS problem is fixed with."""

    ca: str
    client_cert: str


AGENT_FIXES = FixNames(ca="broker_ca_file", client_cert="broker_cert_file and broker_key_file")
CONTROLLER_FIXES = FixNames(ca="--broker-ca", client_cert="--broker-cert and --broker-key")


def _client_cert_refused(text: str) -> bool:
    lowered = text.lower().replace("_", " ")
    return any(
        marker in lowered
        for marker in ("certificate required", "alert bad certificate", "alert unknown ca")
    )


def explain_connect_error(error: BaseException | str | None, fixes: FixNames) -> str:
    """One line: what failed and, for TLS, which setting fixes it."""
    if isinstance(error, ssl.SSLCertVerificationError):
        detail = error.verify_message or str(error)
        return (
            f"TLS certificate check of the broker failed ({detail}): set {fixes.ca} to the CA "
            "that signed the broker's certificate"
        )
    text = (error.reason or str(error)) if isinstance(error, ssl.SSLError) else str(error or "")
    if _client_cert_refused(text):
        return (
            f"the broker refused the TLS session ({text}): it requires a client certificate "
            f"it trusts; set {fixes.client_cert}"
        )
    if isinstance(error, ssl.SSLError):
        return (
            f"TLS handshake with the broker failed ({text}): is this port a TLS listener "
            "(mqtts://), and does the broker accept this client?"
        )
    return text or "connection failed"


class ClosingSSLSocket(ssl.SSLSocket):
    """An ``SSLSocket`` that closes itself when the TLS handshake fails."""

    def do_handshake(self, block: bool = False) -> None:
        try:
            super().do_handshake(block)
        except BaseException:
            self.close()
            raise


def client_tls_context(
    ca_file: Path | None, cert_file: Path | None, key_file: Path | None
) -> ssl.SSLContext:
    """The TLS context an MQTT client connects with: the broker verified against ``ca_file``
    (None: the system's CA store), a client certificate when both files are given, and sockets
    that close themselves when their handshake fails. OSError/ValueError (ssl.SSLError is an
    OSError) when a file is missing or unusable: the caller names its setting."""
    context = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    if cert_file is not None and key_file is not None:
        context.load_cert_chain(cert_file, key_file)
    context.sslsocket_class = ClosingSSLSocket
    return context


class AuthTarget(Protocol):
    """The two calls of a paho ``mqtt.Client`` that :func:`apply_auth` makes (paho stays out of
    ``shared``)."""

    def username_pw_set(self, username: str | None, password: str | None = None) -> None: ...

    def tls_set_context(self, context: ssl.SSLContext | None = None) -> None: ...


def apply_auth(
    client: AuthTarget,
    auth: MqttAuth,
    *,
    tls: bool,
    tls_failed: Callable[[Exception], Exception],
) -> None:
    """Set ``auth``'s user name/password and, for ``mqtts://`` (``tls``), TLS on a paho client;
    a TLS file that is missing or unusable raises what ``tls_failed`` makes of the error (each
    program names its own settings)."""
    if auth.username is not None:
        client.username_pw_set(auth.username, auth.password)
    if tls:
        try:
            context = client_tls_context(auth.ca_file, auth.cert_file, auth.key_file)
            client.tls_set_context(context)
        except (OSError, ValueError) as exc:
            raise tls_failed(exc) from exc
