"""TLS failures in words: the doctor's verdicts, the broker probe's packets, the adapters' lines."""

from __future__ import annotations

import ssl
from dataclasses import replace

import pytest

from agent.link.broker_probe import BrokerAnswer, Problem, connect_packet, read_connack
from agent.service.doctor import HttpAnswer, check_broker, check_controller, evaluate, run_checks
from shared.broker_tls import AGENT_FIXES, CONTROLLER_FIXES, explain_connect_error
from tests.packaging.test_doctor import HEALTHY


def test_connect_packet_is_mqtt_3_1_1_with_optional_credentials() -> None:
    assert connect_packet("c") == bytes.fromhex("100d00044d5154540402000a000163")
    packet = connect_packet("c", "gw", "pw")
    assert packet[9] == 0xC2
    assert packet.endswith(b"\x00\x02gw\x00\x02pw")
    long = connect_packet("c", "gw", "p" * 200)
    remaining = (long[1] & 0x7F) + (long[2] << 7)
    assert long[1] & 0x80
    assert len(long) == 3 + remaining


def test_connack_codes_become_verdicts() -> None:
    assert read_connack(b"\x20\x02\x00\x00") == BrokerAnswer()
    refused = read_connack(b"\x20\x02\x00\x05")
    assert (refused.problem, refused.detail) == (
        "refused",
        "the broker refused the connection: not authorised",
    )
    assert read_connack(b"").problem == "not_mqtt"
    assert read_connack(b"HTTP/1.1 400").problem == "not_mqtt"


@pytest.mark.parametrize(
    ("problem", "fix_names"),
    [
        ("tls_files", "broker_ca_file"),
        ("tls_verify", "set broker_ca_file"),
        ("tls_handshake", "broker_cert_file and broker_key_file"),
        ("tls_session", "broker_cert_file and broker_key_file"),
        ("refused", "broker_username/broker_password"),
        ("not_mqtt", "mqtts://"),
    ],
)
def test_each_broker_problem_fails_with_the_setting_that_fixes_it(
    problem: Problem, fix_names: str
) -> None:
    obs = replace(HEALTHY, broker=BrokerAnswer(problem, "what went wrong", tls=True))
    check = check_broker(obs)
    assert check.status == "fail"
    assert check.detail.endswith("failed: what went wrong")
    assert fix_names in check.fix
    assert evaluate(run_checks(obs)) == 1


def test_a_broker_that_accepts_the_agent_over_tls_says_so() -> None:
    check = check_broker(replace(HEALTHY, broker=BrokerAnswer(tls=True)))
    assert (check.status, check.detail) == ("ok", "mqtt://broker:1883 accepts this agent over TLS")


def test_an_untrusted_controller_certificate_names_controller_ca_file() -> None:
    answer = HttpAnswer(error="[SSL: CERTIFICATE_VERIFY_FAILED] ...", tls_error=True)
    check = check_controller(replace(HEALTHY, controller=answer))
    assert check.status == "fail"
    assert check.detail.startswith("TLS to http://controller:8080 failed: [SSL")
    assert "controller_ca_file" in check.fix


def verify_error(message: str) -> ssl.SSLCertVerificationError:
    error = ssl.SSLCertVerificationError(1, f"[SSL: CERTIFICATE_VERIFY_FAILED] {message}")
    error.verify_message = message
    return error


def test_connect_failures_name_each_programs_own_setting() -> None:
    untrusted = verify_error("self-signed certificate in certificate chain")
    agent = explain_connect_error(untrusted, AGENT_FIXES)
    assert agent.startswith("TLS certificate check of the broker failed (self-signed")
    assert agent.endswith("set broker_ca_file to the CA that signed the broker's certificate")
    assert "set --broker-ca to" in explain_connect_error(untrusted, CONTROLLER_FIXES)

    logged = (
        "failed to receive on socket: [SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED] tlsv13 alert "
        "certificate required (_ssl.c:2580)"
    )
    line = explain_connect_error(logged, CONTROLLER_FIXES)
    assert "requires a client certificate" in line
    assert line.endswith("set --broker-cert and --broker-key")

    assert explain_connect_error(
        ConnectionRefusedError(111, "Connection refused"), AGENT_FIXES
    ) == ("[Errno 111] Connection refused")
    assert explain_connect_error(None, AGENT_FIXES) == "connection failed"
