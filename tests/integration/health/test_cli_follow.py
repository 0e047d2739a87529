"""``jetfleet telemetry ID --follow`` prints samples as they arrive, oldest first, until stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from controller.server import Controller
from shared.codec import encode
from shared.topics import Channel, Topics
from tests.integration.controller.conftest import MqttPeer, new_token, poll
from tests.integration.health.samples import sample

AT_A_TERMINAL = (
    "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module('controller', run_name='__main__')"
)
"""``python -m controller`` as a terminal starts it: Ctrl-C raises KeyboardInterrupt. A process
inherits an ignored SIGINT (a job started with ``&`` by a non-interactive shell, as CI runners
and ``nohup ... &`` do), and Python then leaves it ignored; the test must not depend on how the
suite itself was started."""


def test_follow_prints_new_samples_live(
    controller: Controller, peers: Callable[[str], MqttPeer], prefix: str, tmp_path: Path
) -> None:
    topic = Topics(prefix).device("gw-f", Channel.TELEMETRY)
    errors = (tmp_path / "follow.stderr").open("w")
    agent = peers(controller.broker_url)
    agent.publish(topic, encode(sample("gw-f", 1, cpu=11)))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-X",
            "faulthandler",  # SIGABRT below prints where it is stuck, into follow.stderr
            "-c",
            AT_A_TERMINAL,
            "telemetry",
            "gw-f",
            "--follow",
            "--interval",
            "0.2",
            "--json",
            "--url",
            controller.http_url,
        ],
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
        env={
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "JETFLEET_TOKEN": new_token(controller, "t", "viewer"),
        },
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")))  # type: ignore[union-attr]
    reader.start()
    try:
        poll(lambda: any('"gw-f-1"' in line for line in lines), timeout_s=20, what="first sample")
        agent.publish(topic, encode(sample("gw-f", 2, cpu=22)))
        poll(lambda: any('"gw-f-2"' in line for line in lines), timeout_s=20, what="live sample")
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            # its signal masks (SIGINT is bit 2: blocked, ignored or caught), every thread's stack
            # to stderr (faulthandler on SIGABRT), then reaped here, so no zombie or open pipe is
            # left to the tests after this one
            masks = [
                line
                for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
                if line.startswith(("State", "SigBlk", "SigIgn", "SigCgt"))
            ]
            proc.send_signal(signal.SIGABRT)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            raise AssertionError(
                f"the follow process did not stop on Ctrl-C within 10 s ({masks}); "
                f"printed {lines}; "
                f"stderr: {(tmp_path / 'follow.stderr').read_text()[-3000:]}"
            ) from None
        finally:
            reader.join(10)
            proc.stdout.close()  # type: ignore[union-attr]
            errors.close()
    ids = [line for line in lines if '"sample_id"' in line]
    assert len(ids) == 2, lines  # each sample once, in arrival order
    assert '"gw-f-1"' in ids[0]
    assert '"gw-f-2"' in ids[1]
    assert proc.returncode == 0
