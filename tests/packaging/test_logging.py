"""Agent and controller logs: JSON lines off a TTY, readable on one, secrets never written."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from agent.service.logging_setup import configure_logging as configure_agent
from controller.logging_setup import configure_logging as configure_controller
from shared.logfmt import redact


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.parametrize("configure", [configure_agent, configure_controller])
def test_json_lines_off_a_tty_carry_level_logger_message_and_extras(configure) -> None:
    out = io.StringIO()
    configure("info", stream=out)
    log = logging.getLogger("jetfleet.test")
    log.info("model %s serving", "detector", extra={"device": "gw-01"})
    log.debug("not shown at info")
    try:
        raise ValueError("boom\nsecond line")
    except ValueError:
        log.exception("load failed")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert first["level"] == "info"
    assert first["logger"] == "jetfleet.test"
    assert first["msg"] == "model detector serving"
    assert first["device"] == "gw-01"
    assert first["ts"].endswith("+00:00")
    assert second["level"] == "error"
    assert "ValueError: boom" in second["exc"]


def test_level_comes_from_config() -> None:
    out = io.StringIO()
    configure_agent("debug", stream=out)
    logging.getLogger("jetfleet.test").debug("detail")
    assert json.loads(out.getvalue())["level"] == "debug"


def test_readable_lines_on_a_tty() -> None:
    out = Tty()
    configure_agent("info", stream=out)
    logging.getLogger("jetfleet.test").warning("disk low", extra={"free_mib": 12})
    line = out.getvalue().strip()
    assert "WARNING jetfleet.test: disk low free_mib=12" in line
    with pytest.raises(json.JSONDecodeError):
        json.loads(line)


@pytest.mark.parametrize("configure", [configure_agent, configure_controller])
def test_secrets_are_redacted_in_messages_extras_and_tracebacks(configure) -> None:
    out = io.StringIO()
    configure("info", stream=out)
    log = logging.getLogger("jetfleet.test")
    log.info("connecting to %s", "mqtt://gw:hunter2@broker:1883")
    log.info("db", extra={"url": "postgresql+psycopg://jf:s3cret@db/jetfleet"})
    log.info("GET /a?token=abc123&x=1 with Authorization: Bearer eyJhbGciOi.xyz")
    try:
        raise ConnectionError("cannot reach https://u:pa55@host/")
    except ConnectionError:
        log.exception("fetch failed")
    text = out.getvalue()
    for secret in ("hunter2", "s3cret", "abc123", "eyJhbGciOi", "pa55"):
        assert secret not in text
    records = [json.loads(line) for line in text.splitlines()]
    assert records[0]["msg"] == "connecting to mqtt://gw:***@broker:1883"
    assert records[1]["url"] == "postgresql+psycopg://jf:***@db/jetfleet"
    assert "token=***&x=1" in records[2]["msg"]
    assert "https://u:***@host/" in records[3]["exc"]


def test_redact_keeps_urls_without_secrets_intact() -> None:
    text = "mqtt://broker:1883 and http://[::1]:8080/api/v1/models?name=x"
    assert redact(text) == text
