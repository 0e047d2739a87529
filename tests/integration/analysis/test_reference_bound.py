"""Running the uploaded model for its reference
outputs is bounded too.

A push runs the model in ONNX Runtime on seeded random inputs; a model built to run forever (a
Loop with the largest int64 trip count, a few nodes, far under any node limit) used to hold the
push request and the server's shutdown without end. Against a real controller: past
``--reference-timeout`` the version is stored without references and no child process is left;
and ``jetfleet serve`` stops promptly on SIGTERM in the middle of one, the push answering 503
with nothing stored.
"""

from __future__ import annotations

import hashlib
import logging
import signal
import subprocess
import threading
import uuid
from pathlib import Path

import httpx
import psutil
import pytest

from controller.analysis.reference_runner import CHILD_MODULE
from controller.db.repository import Repository
from controller.db.session import make_engine
from controller.demo.fleet import Process, wait_for
from controller.demo.sample_models import classifier
from controller.settings import Settings
from tests.analysis_models import endless_loop
from tests.integration.analysis.conftest import alive, children_running
from tests.integration.controller.conftest import api_client, start_controller


def test_a_model_that_runs_forever_is_stored_without_references_after_the_bound(
    mosquitto: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="controller.fleet.catalog")
    controller = start_controller(
        Settings(
            db_url=f"sqlite:///{tmp_path}/jetfleet.db",
            broker_url=mosquitto,
            data_dir=tmp_path / "data",
            http_port=0,
            topic_prefix=f"jftest/reference-{uuid.uuid4().hex[:8]}",
            auto_migrate=True,
            reference_timeout_s=2,
        )
    )
    try:
        services = controller.services
        assert services is not None
        loop, normal = endless_loop(), classifier()
        with api_client(controller, timeout=60) as api:
            pushed = api.put("/api/v1/models/loop/versions/1", content=loop)
            control = api.put("/api/v1/models/cls/versions/1", content=normal)
        assert pushed.status_code == 201, pushed.text
        assert control.status_code == 201, control.text

        assert services.catalog.reference(hashlib.sha256(loop).hexdigest()) is None
        assert services.catalog.reference(hashlib.sha256(normal).hexdigest()) is not None
        assert children_running(psutil.Process().pid, CHILD_MODULE) == []
        warnings = [r.getMessage() for r in caplog.records if r.name == "controller.fleet.catalog"]
        assert warnings == [
            "loop:1 has no reference outputs (running the model took longer than 2 s "
            "(--reference-timeout)); devices will check warm-up outputs for NaN/Inf only"
        ]
    finally:
        controller.stop()


def test_serve_stops_promptly_on_sigterm_while_a_push_runs_its_model(
    served: tuple[Process, str, Path],
) -> None:
    server, url, data_dir = served
    admin = (data_dir / "admin-token").read_text().strip()
    answers: list[httpx.Response | Exception] = []

    def push() -> None:
        with httpx.Client(
            base_url=url, timeout=60, headers={"Authorization": f"Bearer {admin}"}
        ) as api:
            try:
                answers.append(api.put("/api/v1/models/loop/versions/1", content=endless_loop()))
            except httpx.HTTPError as exc:
                answers.append(exc)

    pusher = threading.Thread(target=push, daemon=True)
    pusher.start()
    child = wait_for(
        "the reference child process",
        lambda: children_running(server.popen.pid, CHILD_MODULE),
        30,
        [server],
    )[0]

    server.popen.send_signal(signal.SIGTERM)

    try:
        code = server.popen.wait(timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"jetfleet serve still running 20 s after SIGTERM:\n{server.tail()}")
    assert code == 0, server.tail()
    assert not alive(child), "the reference child outlived the controller"
    pusher.join(30)
    assert len(answers) == 1
    answer = answers[0]
    if isinstance(answer, httpx.Response):  # else the connection closed first: also unstored
        assert answer.status_code == 503, answer.text
        assert "push again" in answer.json()["detail"]
    engine = make_engine(f"sqlite:///{(data_dir / 'jetfleet.db').resolve()}")
    try:
        assert Repository(engine).find_version("loop", "1") is None
    finally:
        engine.dispose()
