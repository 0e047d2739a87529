"""mqtts:// and https:// end to end: a real Mosquitto with a TLS listener, the real agent daemon,
a real controller serving HTTPS, all with a CA generated for the test."""

from __future__ import annotations

import logging
import ssl
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from agent.settings import AgentSettings
from controller.demo.sample_models import classifier
from controller.errors import BusError
from controller.server import Controller
from controller.settings import Settings
from shared.codec import decode_for
from shared.messages import Status
from shared.topics import Channel, Topics
from shared.transport import MqttAuth
from tests.integration.tls.agent_runner import RunningAgent, poll
from tests.integration.tls.tls_broker import TlsBroker
from tests.ports import free_port
from tests.tls_ca import TlsFiles

T = TypeVar("T")


class TlsObserver:
    """A paho client on the TLS broker that records every status message under ``prefix``."""

    def __init__(self, broker: TlsBroker, files: TlsFiles, topics: Topics) -> None:
        self.topics = topics
        self.statuses: list[Status] = []
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"obs-{uuid.uuid4().hex}")
        self.client.tls_set(
            ca_certs=str(files.ca_cert),
            certfile=str(files.client_cert),
            keyfile=str(files.client_key),
        )
        self.client.on_message = self._on_message
        subscribed = threading.Event()
        self.client.on_subscribe = lambda *args: subscribed.set()
        self.client.connect("127.0.0.1", broker.port)
        self.client.loop_start()
        self.client.subscribe(f"{topics.prefix}/+/{Channel.STATUS.value}", qos=1)
        assert subscribed.wait(10), "observer subscription not acknowledged"

    def _on_message(self, client: Any, userdata: Any, msg: mqtt.MQTTMessage) -> None:
        parsed = self.topics.parse(msg.topic)
        if parsed is not None and msg.payload:
            message = decode_for(parsed[1], msg.payload)
            assert isinstance(message, Status)
            self.statuses.append(message)

    def online(self, device_id: str) -> bool:
        return any(s.device_id == device_id and s.state == "online" for s in self.statuses)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@pytest.fixture
def topics() -> Topics:
    return Topics(f"tls-{uuid.uuid4().hex[:10]}/v1")


@pytest.fixture
def observer(cert_broker: TlsBroker, tls: TlsFiles, topics: Topics) -> Iterator[TlsObserver]:
    obs = TlsObserver(cert_broker, tls, topics)
    try:
        yield obs
    finally:
        obs.close()


def agent_settings(
    device_id: str, broker_url: str, topics: Topics, state_dir: Path, **extra: Any
) -> AgentSettings:
    return AgentSettings(
        device_id=device_id,
        labels={"site": "tls-lab"},
        broker_url=broker_url,
        state_dir=state_dir,
        serve_address=f"127.0.0.1:{free_port()}",
        topic_prefix=topics.prefix,
        telemetry_interval_s=0.5,
        runtime="onnxruntime",
        **extra,
    )


def wait_for_log(caplog: pytest.LogCaptureFixture, text: str, timeout_s: float = 20.0) -> str:
    def found() -> str | None:
        return next((r.getMessage() for r in caplog.records if text in r.getMessage()), None)

    return poll(found, f"a log line containing {text!r}", timeout_s)


def test_agent_state_reaches_a_controller_over_mqtts_and_its_model_arrives_over_https(
    tls: TlsFiles, tls_broker: TlsBroker, topics: Topics, tmp_path: Path
) -> None:
    controller = Controller(
        Settings(
            db_url=f"sqlite:///{tmp_path}/jetfleet.db",
            broker_url=tls_broker.url,
            data_dir=tmp_path / "data",
            http_port=0,
            topic_prefix=topics.prefix,
            auto_migrate=True,
            auth_required=False,
            broker_auth=MqttAuth(ca_file=tls.ca_cert),
            tls_cert_file=tls.server_cert,
            tls_key_file=tls.server_key,
        )
    )
    controller.start()
    agent: RunningAgent | None = None
    try:
        controller.serve_in_thread()
        assert controller.http_url.startswith("https://127.0.0.1:")
        verify = ssl.create_default_context(cafile=str(tls.ca_cert))
        with httpx.Client(base_url=controller.http_url, verify=verify, timeout=10) as api:
            agent = RunningAgent(
                agent_settings(
                    "gw-tls",
                    tls_broker.url,
                    topics,
                    tmp_path / "agent",
                    broker_ca_file=tls.ca_cert,
                    controller_url=controller.http_url,
                    controller_ca_file=tls.ca_cert,
                )
            )

            def device() -> dict[str, Any] | None:
                response = api.get("/api/v1/devices/gw-tls")
                body: dict[str, Any] = response.json()
                return body if response.status_code == 200 and body["online"] else None

            found = poll(device, "gw-tls online at the controller")
            assert found["facts"] is not None  # its report arrived (its labels are ignored)

            pushed = api.put("/api/v1/models/classifier/versions/1", content=classifier(seed=1))
            assert pushed.status_code == 201, pushed.text
            assert pushed.json()["download_url"].startswith("https://")
            deployed = api.post(
                "/api/v1/deployments",
                json={"model": "classifier", "version": "1", "device": "gw-tls"},
            )
            assert deployed.status_code == 200, deployed.text

            def serving() -> dict[str, Any] | None:
                body: dict[str, Any] = api.get("/api/v1/devices/gw-tls").json()
                slots = body["reported"]
                done = any(s["active_version"] == "1" for s in slots)
                return body if done else None

            reported = poll(serving, "classifier 1 serving on gw-tls", timeout_s=90)
            slot = reported["reported"][0]
            assert slot["last_error"] is None
            shared = poll(
                lambda: api.get("/api/v1/engines").json(),
                "the built engine shared through the HTTPS engine store",
            )
            assert [m["engine_key"] for m in shared] == [slot["engine_key"]]
    finally:
        if agent is not None:
            agent.stop()
        controller.stop()


def test_an_agent_without_the_broker_ca_never_connects_and_says_which_setting_fixes_it(
    cert_broker: TlsBroker,
    tls: TlsFiles,
    observer: TlsObserver,
    topics: Topics,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="agent.link.mqtt_link")
    settings = agent_settings(
        "gw-no-ca",
        cert_broker.url,
        topics,
        tmp_path / "agent",
        broker_cert_file=tls.client_cert,
        broker_key_file=tls.client_key,
    )
    agent = RunningAgent(settings)
    try:
        line = wait_for_log(caplog, "TLS certificate check of the broker failed")
        assert "set broker_ca_file" in line
    finally:
        agent.stop()
    assert not observer.online("gw-no-ca")


def test_a_broker_that_wants_client_certificates_admits_the_agent_that_has_one(
    cert_broker: TlsBroker,
    tls: TlsFiles,
    observer: TlsObserver,
    topics: Topics,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="agent.link.mqtt_link")
    without = RunningAgent(
        agent_settings(
            "gw-no-cert", cert_broker.url, topics, tmp_path / "a1", broker_ca_file=tls.ca_cert
        )
    )
    try:
        line = wait_for_log(caplog, "requires a client certificate")
        assert "set broker_cert_file and broker_key_file" in line
    finally:
        without.stop()

    with_cert = RunningAgent(
        agent_settings(
            "gw-cert",
            cert_broker.url,
            topics,
            tmp_path / "a2",
            broker_ca_file=tls.ca_cert,
            broker_cert_file=tls.client_cert,
            broker_key_file=tls.client_key,
        )
    )
    try:
        poll(lambda: observer.online("gw-cert"), "gw-cert online over mqtts with its certificate")
    finally:
        with_cert.stop()
    assert not observer.online("gw-no-cert")


def test_a_controller_that_does_not_trust_the_broker_refuses_to_start_and_names_the_option(
    tls_broker: TlsBroker, topics: Topics, tmp_path: Path
) -> None:
    controller = Controller(
        Settings(
            db_url=f"sqlite:///{tmp_path}/jetfleet.db",
            broker_url=tls_broker.url,
            data_dir=tmp_path / "data",
            http_port=0,
            topic_prefix=topics.prefix,
            auto_migrate=True,
            auth_required=False,
        )
    )
    with pytest.raises(BusError) as refused:
        controller.start()
    message = str(refused.value)
    assert "TLS certificate check of the broker failed" in message
    assert "--broker-ca" in message
