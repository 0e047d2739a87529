"""Checks of the controller's TLS files at start, so a wrong path is one clear line, not a trace.

The HTTPS certificate and key (``--tls-cert``/``--tls-key``) are loaded once into a throwaway
``ssl`` context: a missing or unreadable file, a file that is not PEM, or a key that does not
belong to the certificate each get a message naming the file and the option to fix. The broker's
CA bundle and client certificate (``--broker-ca``/``--broker-cert``/``--broker-key``) are checked
the same way before paho sees them.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from controller.errors import InvalidInput
from shared.transport import MqttAuth


def _readable(path: Path, what: str, option: str) -> None:
    try:
        with path.open("rb") as f:
            f.read(1)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise InvalidInput(f"cannot read {what} {path}: {reason}; fix {option}") from exc


def check_server_tls(cert_file: Path | None, key_file: Path | None) -> None:
    """Both or neither; each readable; a PEM certificate and the key that belongs to it."""
    if cert_file is None and key_file is None:
        return
    if cert_file is None or key_file is None:
        raise InvalidInput("HTTPS needs both --tls-cert and --tls-key (PEM files)")
    _readable(cert_file, "TLS certificate", "--tls-cert")
    _readable(key_file, "TLS key", "--tls-key")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert_file, key_file)
    except ssl.SSLError as exc:
        raise InvalidInput(
            f"cannot use TLS certificate {cert_file} with key {key_file} ({exc.reason or exc}): "
            + _pair_hint(exc, "--tls-cert", "--tls-key")
        ) from exc


def _pair_hint(exc: ssl.SSLError, cert_option: str, key_option: str) -> str:
    if exc.reason == "KEY_VALUES_MISMATCH":
        return f"{key_option} is not the private key of {cert_option}"
    return f"{cert_option} must be a PEM certificate and {key_option} its unencrypted PEM key"


def check_broker_tls(auth: MqttAuth) -> None:
    """The broker CA bundle and client certificate/key of ``auth``, when given, are usable."""
    if auth.ca_file is not None:
        _readable(auth.ca_file, "broker CA file", "--broker-ca")
        try:
            ssl.create_default_context(cafile=str(auth.ca_file))
        except ssl.SSLError as exc:
            raise InvalidInput(
                f"broker CA file {auth.ca_file} holds no usable PEM certificate "
                f"({exc.reason or exc}); fix --broker-ca"
            ) from exc
    if auth.cert_file is not None and auth.key_file is not None:
        _readable(auth.cert_file, "broker client certificate", "--broker-cert")
        _readable(auth.key_file, "broker client key", "--broker-key")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        try:
            context.load_cert_chain(auth.cert_file, auth.key_file)
        except ssl.SSLError as exc:
            raise InvalidInput(
                f"cannot use broker client certificate {auth.cert_file} with key "
                f"{auth.key_file} ({exc.reason or exc}): "
                + _pair_hint(exc, "--broker-cert", "--broker-key")
            ) from exc
