"""A pushed model's analysis cannot hold the controller.

The probe: an 800 KB ONNX of 30,000 Identity nodes took ~533 s of one core inside the push
request, and a `jetfleet serve` busy with a 10,000-node chain ignored SIGTERM. Here, against a
real controller over HTTP: the push answers at once with the analysis pending and the analysis
follows in a child process; a model over the node limit is refused with 422 naming the option;
an analysis past its bound is stopped and recorded as failed; versions left pending are analysed
after a restart; and `jetfleet serve` stops promptly on SIGTERM in the middle of an analysis.
"""

from __future__ import annotations

import hashlib
import signal
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from click.testing import CliRunner

from controller.analysis.runner import CHILD_MODULE
from controller.artifacts.store import ArtifactStore
from controller.cli.main import cli
from controller.db import migrate
from controller.db.repository import Repository
from controller.db.session import make_engine
from controller.demo.fleet import Process, wait_for
from controller.demo.sample_models import classifier
from controller.records import VersionRecord
from controller.server import Controller
from controller.settings import DEFAULT_MAX_MODEL_NODES, Settings
from tests.analysis_models import identity_chain
from tests.integration.analysis.conftest import alive, children_running
from tests.integration.controller.conftest import admin_token, api_client, poll, start_controller

PROBE = "/api/v1/models/probe/versions/1"


@pytest.fixture
def start(mosquitto: str, db_url: str, tmp_path: Path) -> Iterator[Callable[..., Controller]]:
    """Start a controller (on each database) with some settings changed; all stopped after."""
    started: list[Controller] = []

    def make(**changes: Any) -> Controller:
        settings = Settings(
            db_url=db_url,
            broker_url=mosquitto,
            data_dir=tmp_path / "data",
            http_port=0,
            topic_prefix=f"jftest/limits-{uuid.uuid4().hex[:8]}",
            auto_migrate=True,
            **changes,
        )
        controller = start_controller(settings)
        started.append(controller)
        return controller

    yield make
    for controller in started:
        controller.stop()


def shown(controller: Controller, ref: str) -> str:
    runner = CliRunner(env={"JETFLEET_TOKEN": admin_token(controller)})
    result = runner.invoke(cli, ["models", "show", ref, "--url", controller.http_url])
    assert result.exit_code == 0, result.output
    return result.output


def settled(api: httpx.Client, path: str, timeout_s: float = 60) -> dict[str, Any]:
    """The version at ``path`` once its analysis is no longer pending."""

    def check() -> dict[str, Any] | None:
        version: dict[str, Any] = api.get(path).json()
        return None if version["analysis_state"] == "pending" else version

    return poll(check, timeout_s=timeout_s, what=f"the analysis of {path} to settle")


@pytest.mark.slow
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_push_answers_at_once_and_the_analysis_follows(
    start: Callable[..., Controller],
) -> None:
    controller = start()
    with api_client(controller, timeout=30) as api:
        pushed = api.put(PROBE, content=identity_chain(30_000))

        assert pushed.status_code == 201, pushed.text
        assert pushed.json()["analysis_state"] == "pending"
        assert pushed.json()["delegation"] == {}

        done = settled(api, PROBE)
        assert done["analysis_state"] == "done", done
        assert done["analysis_error"] is None
        assert {v: s["verdict"] for v, s in done["delegation"].items()} == {
            "8.5": "full",
            "8.6": "full",
            "10.1": "full",
        }
        report = api.get(f"{PROBE}/analysis", params={"trt": "10.1"}).json()
        assert [len(p["nodes"]) for p in report["partitions"]] == [30_000]
    assert "trt 10.1 full delegation: 1 partition, 100.0% of nodes on GPU" in shown(
        controller, "probe:1"
    )


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_model_over_the_node_limit_is_refused_with_422_naming_the_option(
    start: Callable[..., Controller], tmp_path: Path
) -> None:
    controller = start(max_model_nodes=1000)
    with api_client(controller) as api:
        refused = api.put("/api/v1/models/big/versions/1", content=identity_chain(1001))

        assert refused.status_code == 422, refused.text
        assert refused.json()["detail"] == (
            "the model has 1001 nodes, more than this controller's limit of 1000 "
            "(--max-model-nodes): nothing was stored; start `jetfleet serve` with a larger "
            "--max-model-nodes if the model is right"
        )
        assert api.get("/api/v1/models/big").status_code == 404
        assert api.put("/api/v1/models/big/versions/2", content=identity_chain(1000)).is_success

    path = tmp_path / "big.onnx"
    path.write_bytes(identity_chain(1001))
    runner = CliRunner(env={"JETFLEET_TOKEN": admin_token(controller)})
    args = ["models", "push", str(path), "--name", "big", "--version", "3"]
    pushed = runner.invoke(cli, [*args, "--url", controller.http_url])
    assert pushed.exit_code == 1
    assert pushed.output.strip().splitlines() == [
        "Error: the model has 1001 nodes, more than this controller's limit of 1000 "
        "(--max-model-nodes): nothing was stored; start `jetfleet serve` with a larger "
        "--max-model-nodes if the model is right (HTTP 422)"
    ]


@pytest.mark.slow
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_an_analysis_past_its_bound_is_stopped_and_recorded_as_failed(
    start: Callable[..., Controller],
) -> None:
    controller = start(analysis_timeout_s=1.0)
    with api_client(controller, timeout=30) as api:
        pushed = api.put(PROBE, content=identity_chain(60_000))
        assert pushed.status_code == 201, pushed.text

        failed = settled(api, PROBE)

        assert failed["analysis_state"] == "failed"
        assert failed["analysis_error"].startswith(
            "it did not finish within 1 s and was stopped; restart `jetfleet serve` with a "
            "larger --analysis-timeout to analyse it again"
        )
        refused = api.get(f"{PROBE}/analysis")
        assert refused.status_code == 404
        assert refused.json()["detail"].startswith(
            "no analysis of probe:1: it failed: it did not finish within 1 s"
        )
    assert "  analysis failed: it did not finish within 1 s and was stopped" in shown(
        controller, "probe:1"
    )
    assert children_running(psutil.Process().pid, CHILD_MODULE) == []

    controller.stop()
    with api_client(start(), timeout=30) as api:  # the default bound, 120 s: analysed again
        assert settled(api, PROBE)["analysis_state"] == "done"


def store_pending(data_dir: Path, db_url: str, name: str, onnx: bytes) -> VersionRecord:
    """A version stored with its analysis pending and queued nowhere, as a controller killed in
    the middle of an analysis leaves it."""
    migrate.upgrade(db_url)
    pending = ArtifactStore(data_dir).begin()
    pending.write(onnx)
    stored = pending.commit()
    engine = make_engine(db_url)
    try:
        return Repository(engine).add_version(
            name, "1", stored.sha256, stored.size, [], [], analysis_state="pending"
        )
    finally:
        engine.dispose()


def ran_out_of_time(db_url: str, record: VersionRecord, bound_s: float) -> None:
    engine = make_engine(db_url)
    try:
        Repository(engine).set_analysis(
            record.id, "failed", error=f"did not finish within {bound_s} s", out_of_time_s=bound_s
        )
    finally:
        engine.dispose()


def test_versions_left_pending_are_analysed_when_the_controller_starts(
    start: Callable[..., Controller], db_url: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    store_pending(data, db_url, "probe", identity_chain(2000))
    store_pending(data, db_url, "junk", b"not an onnx model")
    # stopped at a bound of 600 s, more than this controller's 120: not worth another run
    ran_out_of_time(db_url, store_pending(data, db_url, "stuck", identity_chain(2500)), 600)
    # stopped at 1 s: this controller's 120 s may do, so it runs again (after "stuck" if at all)
    ran_out_of_time(db_url, store_pending(data, db_url, "slow", identity_chain(3000)), 1)

    controller = start()

    with api_client(controller) as api:
        assert settled(api, PROBE)["delegation"]["10.1"]["verdict"] == "full"
        junk = settled(api, "/api/v1/models/junk/versions/1")
        assert settled(api, "/api/v1/models/slow/versions/1")["analysis_state"] == "done"
        stuck = api.get("/api/v1/models/stuck/versions/1").json()
    assert junk["analysis_state"] == "failed"
    assert junk["analysis_error"].startswith("not a valid ONNX model")
    assert (stuck["analysis_state"], stuck["analysis_error"]) == (
        "failed",
        "did not finish within 600 s",
    )


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_models_show_and_the_api_say_pending_then_failed(
    start: Callable[..., Controller],
) -> None:
    controller = start()
    services = controller.services
    assert services is not None
    sha = hashlib.sha256(b"never analysed").hexdigest()
    record = services.repo.add_version("det", "1", sha, 14, [], [], analysis_state="pending")

    assert "  analysis pending (the controller runs it after the push)" in shown(
        controller, "det:1"
    )
    with api_client(controller) as api:
        assert api.get("/api/v1/models/det/versions/1").json()["analysis_state"] == "pending"
        pending = api.get("/api/v1/models/det/versions/1/analysis")
        assert pending.status_code == 409
        assert pending.json()["detail"].startswith("the analysis of det:1 is still pending")

        services.repo.set_analysis(record.id, "failed", error="the model's bytes are missing")

        assert api.get("/api/v1/models/det/versions/1").json()["analysis_error"] == (
            "the model's bytes are missing"
        )
    assert "  analysis failed: the model's bytes are missing" in shown(controller, "det:1")


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_cli_push_waits_for_the_analysis_unless_told_not_to(
    start: Callable[..., Controller], tmp_path: Path
) -> None:
    controller = start()
    path = tmp_path / "classifier.onnx"
    path.write_bytes(classifier())
    runner = CliRunner(env={"JETFLEET_TOKEN": admin_token(controller)})

    def push(version: str, *extra: str) -> list[str]:
        args = ["models", "push", str(path), "--name", "cls", "--version", version, *extra]
        result = runner.invoke(cli, [*args, "--url", controller.http_url])
        assert result.exit_code == 0, result.output
        return result.output.splitlines()

    waited = push("1")
    assert waited[0].startswith("pushed cls:1 sha256=")
    assert waited[1] == "analysing cls:1 on the controller (--no-wait does not wait)..."
    assert "  trt 10.1 full delegation: 1 partition, 100.0% of FLOPs on GPU" in waited[2:]

    assert push("2", "--no-wait")[1:] == [
        "  analysis pending (the controller runs it after the push)"
    ]


def test_serve_stops_promptly_on_sigterm_in_the_middle_of_an_analysis(
    served: tuple[Process, str, Path],
) -> None:
    server, url, data_dir = served
    admin = (data_dir / "admin-token").read_text().strip()
    chain = identity_chain(DEFAULT_MAX_MODEL_NODES - 1)
    with httpx.Client(
        base_url=url, timeout=60, headers={"Authorization": f"Bearer {admin}"}
    ) as api:
        pushed = api.put(PROBE, content=chain)
    assert pushed.status_code == 201, pushed.text
    assert pushed.json()["analysis_state"] == "pending"
    child = wait_for(
        "the analysis child process",
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
    assert not alive(child), "the analysis child outlived the controller"
    engine = make_engine(f"sqlite:///{(data_dir / 'jetfleet.db').resolve()}")
    try:
        record = Repository(engine).find_version("probe", "1")
    finally:
        engine.dispose()
    assert record is not None
    assert record.analysis_state == "pending"  # analysed again at the next start
