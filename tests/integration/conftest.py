"""Fixtures several integration folders share: brokers a test may stop, restart or wrap in TLS."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.spool.mqtt_peers import MosquittoBroker
from tests.integration.tls.tls_broker import TlsBroker
from tests.ports import free_port
from tests.tls_ca import TlsFiles, make_ca


@pytest.fixture
def private_broker(tmp_path: Path) -> Iterator[MosquittoBroker]:
    """A Mosquitto of this test's own, on a free port, that the test may stop and start again."""
    directory = tmp_path / "broker"
    directory.mkdir()
    broker = MosquittoBroker(directory, free_port())
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def tls(tmp_path: Path) -> TlsFiles:
    """A CA generated for this test, with a server (127.0.0.1, localhost) and client certificate."""
    return make_ca(tmp_path / "pki")


@pytest.fixture
def tls_broker(tls: TlsFiles, tmp_path: Path) -> Iterator[TlsBroker]:
    """Mosquitto serving mqtts:// with the test CA's server certificate; anonymous clients."""
    directory = tmp_path / "tls-broker"
    directory.mkdir()
    broker = TlsBroker(tls, directory)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()
