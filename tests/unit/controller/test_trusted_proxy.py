"""``jetfleet serve --trusted-proxy``: an address or a network, normalised for uvicorn."""

from __future__ import annotations

import pytest

from controller.errors import InvalidInput
from controller.settings import parse_trusted_proxy


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("127.0.0.1", "127.0.0.1"),
        (" 10.0.0.5 ", "10.0.0.5"),
        ("10.0.0.0/8", "10.0.0.0/8"),
        ("::1", "::1"),
        ("fd00:0::/64", "fd00::/64"),
    ],
)
def test_addresses_and_networks_are_normalised(given: str, kept: str) -> None:
    assert parse_trusted_proxy(given) == kept


@pytest.mark.parametrize("given", ["*", "proxy.example", "10.0.0.0/33", ""])
def test_anything_else_is_refused(given: str) -> None:
    with pytest.raises(InvalidInput, match="--trusted-proxy expects an IP address or network"):
        parse_trusted_proxy(given)


@pytest.mark.parametrize("given", ["10.1.2.3/8", "fd00::1/64"])
def test_a_network_with_host_bits_is_refused_not_widened(given: str) -> None:
    """``10.0.0.5/24`` meant one proxy and trusted the whole /24."""
    with pytest.raises(InvalidInput, match="has bits outside the"):
        parse_trusted_proxy(given)
