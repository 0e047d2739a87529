"""Fixtures of the TLS tests: a throwaway CA, Mosquitto with a TLS listener, clean settings."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.server import Controller
from controller.settings import Settings
from shared.topics import Topics
from tests.integration.tls.tls_broker import TlsBroker
from tests.tls_ca import TlsFiles


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No JETFLEET_* setting of the developer's shell leaks into the agents started here."""
    for name in list(os.environ):
        if name.upper().startswith("JETFLEET_") and not name.upper().startswith("JETFLEET_TEST"):
            monkeypatch.delenv(name)


@pytest.fixture
def cert_broker(tls: TlsFiles, tmp_path: Path) -> Iterator[TlsBroker]:
    """Like ``tls_broker``, but every client must present a certificate signed by the test CA."""
    directory = tmp_path / "cert-broker"
    directory.mkdir()
    broker = TlsBroker(tls, directory, require_certificate=True)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def https_controller(
    tls: TlsFiles, mosquitto: str, tmp_path: Path
) -> Iterator[tuple[Controller, Topics]]:
    """A controller serving HTTPS with the test CA's server certificate (plain broker, no auth)."""
    topics = Topics(f"https-{uuid.uuid4().hex[:10]}/v1")
    controller = Controller(
        Settings(
            db_url=f"sqlite:///{tmp_path}/jetfleet.db",
            broker_url=mosquitto,
            data_dir=tmp_path / "data",
            http_port=0,
            topic_prefix=topics.prefix,
            auto_migrate=True,
            auth_required=False,
            tls_cert_file=tls.server_cert,
            tls_key_file=tls.server_key,
        )
    )
    controller.start()
    try:
        controller.serve_in_thread()
        yield controller, topics
    finally:
        controller.stop()
