"""The forwarding thread under shared.supervision: a sink that raises once does not stop it."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from agent.link.spool import Forwarder, Spool, SpoolEntry


def test_the_spool_keeps_forwarding_in_order_after_the_sink_raised_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sent: list[str] = []
    calls = [0]
    all_sent = threading.Event()

    def publish(entry: SpoolEntry) -> bool:
        calls[0] += 1
        if calls[0] == 1:
            raise RuntimeError("link bug")
        sent.append(entry.key)
        if len(sent) == 5:
            all_sent.set()
        return True

    with Spool(tmp_path / "spool.sqlite3") as spool, caplog.at_level(logging.ERROR):
        for i in range(5):
            spool.append("telemetry", b"x", f"k{i}")
        forwarder = Forwarder(spool, publish, idle_s=0.05)
        forwarder.start()
        try:
            assert all_sent.wait(30), f"forwarding stopped after the failure; sent {sent}"
        finally:
            forwarder.stop()
        assert len(spool) == 0
    assert sent == [f"k{i}" for i in range(5)]
    assert any(
        "background thread spool-forwarder crashed" in r.getMessage() for r in caplog.records
    )
