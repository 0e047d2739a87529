"""The parsing of the address, URL, size and name forms the controller's options take; each
error is :class:`~controller.errors.InvalidInput` naming the option."""

from __future__ import annotations

import ipaddress
import re

from controller.errors import InvalidInput
from controller.settings.defaults import _BUCKET, _REPLICA_ID
from shared import transport

_SIZE = re.compile(r"(?P<n>\d+)\s*(?P<unit>B?|[KMGT]i?B?)", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(text: str) -> int:
    """``2G``, ``512MiB``, ``64k`` or plain bytes → bytes (binary units); ValueError otherwise."""
    match = _SIZE.fullmatch(text.strip())
    if match is None or int(match["n"]) == 0:
        raise ValueError(f"expected a positive size like 2G, 512M or 1048576, got {text!r}")
    return int(match["n"]) * _UNITS[match["unit"][:1].lower()]


def parse_artifact_store(url: str) -> tuple[str, str]:
    """Bucket and key prefix of ``s3://BUCKET[/PREFIX]``; InvalidInput names the option."""
    scheme, sep, rest = url.partition("://")
    bucket, _, prefix = rest.partition("/")
    if scheme != "s3" or not sep or not _BUCKET.fullmatch(bucket):
        raise InvalidInput(
            f"--artifact-store expects s3://BUCKET or s3://BUCKET/PREFIX with a bucket name of "
            f"3-63 of a-z 0-9 . - (without it: the data directory), got {url!r}"
        )
    return bucket, prefix.strip("/")


def check_replica_id(value: str) -> str:
    """``value`` when it is a valid replica id, else :class:`InvalidInput` naming the rule."""
    if not _REPLICA_ID.fullmatch(value):
        raise InvalidInput(
            f"replica id {value!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a "
            "letter or digit (e.g. --replica-id ctl-1)"
        )
    return value


def parse_host_port(text: str, option: str) -> tuple[str, int]:
    """Split ``HOST:PORT`` (``[v6]:PORT`` too); the error names the option."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise InvalidInput(f"{option} expects HOST:PORT (e.g. 127.0.0.1:8080), got {text!r}")
    return host.strip("[]"), int(port_text)


def parse_broker_url(url: str) -> tuple[str, int]:
    """Host and port of an ``mqtt://`` or ``mqtts://`` URL (ports 1883 / 8883 when absent)."""
    try:
        address = transport.parse_broker_url(url)
    except ValueError as exc:
        raise InvalidInput(f"invalid broker URL {url!r}: {exc}") from exc
    return address.host, address.port


def parse_trusted_proxy(text: str) -> str:
    """An IP address or CIDR network (``10.0.0.0/24``), normalised; InvalidInput otherwise, and
    for a network with host bits (``10.0.0.5/24`` was silently widened to the whole /24) or one
    that holds every address (``0.0.0.0/0``: every client could then claim any address)."""
    try:
        if "/" in text:
            network = ipaddress.ip_network(text.strip(), strict=False)
        else:
            return str(ipaddress.ip_address(text.strip()))
    except ValueError as exc:
        raise InvalidInput(
            f"--trusted-proxy expects an IP address or network (e.g. 10.0.0.5 or 10.0.0.0/24), "
            f"got {text!r}"
        ) from exc
    address = text.strip().split("/", 1)[0]
    if ipaddress.ip_address(address) != network.network_address:
        raise InvalidInput(
            f"--trusted-proxy {text}: the address has bits outside the /{network.prefixlen} "
            f"network; give the proxy ({address}) or the network ({network})"
        )
    if network.prefixlen == 0:
        raise InvalidInput(
            f"--trusted-proxy {text} trusts X-Forwarded-For from every address: any client "
            "could claim any address (rate limits, audit); name the proxies' addresses"
        )
    return str(network)
