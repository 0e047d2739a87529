"""The controller's threads that it cannot do without end the process when they die (``exit``:
systemd starts a new one), observed here through the fatal action a test puts in place of the
exit; and the one-shot republish thread's crash is logged with its name. Real uvicorn, real
Mosquitto, real amqtt."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from controller.broker_admin.embedded_broker import EmbeddedBroker
from controller.server import Controller
from controller.settings import Settings
from tests.integration.controller.conftest import poll
from tests.integration.spool.mqtt_peers import MosquittoBroker


def settings(broker_url: str, sqlite_url: str, tmp_path: Path, prefix: str) -> Settings:
    return Settings(
        db_url=sqlite_url,
        broker_url=broker_url,
        data_dir=tmp_path / "data",
        http_port=0,
        topic_prefix=prefix,
        auto_migrate=True,
    )


class Fatal:
    """The fatal action of an ``exit`` thread, recorded instead of ending the test process."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def __call__(self, name: str, exc: BaseException) -> None:
        with self._lock:
            self.calls.append((name, str(exc)))


def test_a_crash_of_the_http_server_thread_ends_the_process(
    mosquitto: str, sqlite_url: str, tmp_path: Path, prefix: str
) -> None:
    fatal = Fatal()
    controller = Controller(settings(mosquitto, sqlite_url, tmp_path, prefix), on_fatal=fatal)
    controller.start()
    try:
        controller.serve_in_thread()
        assert httpx.get(f"{controller.http_url}/healthz", timeout=10).status_code == 200
        assert fatal.calls == []

        async def crash(_counter: int) -> bool:
            raise RuntimeError("injected: uvicorn's main loop failed")

        server = controller._server
        assert server is not None
        server.on_tick = crash  # type: ignore[method-assign]
        poll(lambda: fatal.calls, 10, "the fatal action")
        assert fatal.calls == [("jetfleet-http", "injected: uvicorn's main loop failed")]
    finally:
        controller.stop()


def test_a_stopped_http_server_is_not_a_crash(
    mosquitto: str, sqlite_url: str, tmp_path: Path, prefix: str
) -> None:
    fatal = Fatal()
    controller = Controller(settings(mosquitto, sqlite_url, tmp_path, prefix), on_fatal=fatal)
    controller.start()
    controller.serve_in_thread()
    controller.stop()
    assert fatal.calls == []


def test_a_crash_of_the_embedded_broker_loop_ends_the_process() -> None:
    fatal = Fatal()
    broker = EmbeddedBroker("127.0.0.1", 0, on_fatal=fatal)
    broker.start()
    try:

        def die() -> None:
            raise SystemExit("injected: the broker's event loop ended")

        loop = broker._loop
        assert isinstance(loop, asyncio.AbstractEventLoop)
        loop.call_soon_threadsafe(die)
        poll(lambda: fatal.calls, 10, "the fatal action")
        assert fatal.calls == [
            ("jetfleet-embedded-broker", "injected: the broker's event loop ended")
        ]
    finally:
        broker.stop()


def test_a_stopped_embedded_broker_is_not_a_crash() -> None:
    fatal = Fatal()
    broker = EmbeddedBroker("127.0.0.1", 0, on_fatal=fatal)
    broker.start()
    broker.stop()
    assert fatal.calls == []


def test_a_crash_of_the_republish_after_a_reconnect_is_logged_with_the_thread_name(
    private_broker: MosquittoBroker,
    sqlite_url: str,
    tmp_path: Path,
    prefix: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = f"mqtt://127.0.0.1:{private_broker.port}"
    controller = Controller(settings(url, sqlite_url, tmp_path, prefix))
    controller.start()
    try:
        services = controller.services
        assert services is not None

        def republish_all(yield_to: Callable[[], bool] | None = None) -> int:
            raise RuntimeError("injected: the devices could not be listed")

        monkeypatch.setattr(services.fleet, "republish_all", republish_all)
        with caplog.at_level(logging.ERROR, logger="controller.server"):
            private_broker.stop()
            private_broker.start()  # the bus reconnects and republishes on its own thread

            def crashed() -> list[logging.LogRecord]:
                return [
                    r
                    for r in caplog.records
                    if "background thread jetfleet-republish crashed" in r.getMessage()
                ]

            [record] = poll(crashed, 30, "the republish thread's crash in the log")
        assert record.exc_info is not None
        assert "injected: the devices could not be listed" in str(record.exc_info[1])
    finally:
        controller.stop()
