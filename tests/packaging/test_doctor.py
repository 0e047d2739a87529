"""`jetfleet-agent doctor`: each verdict and its fix, the exit code, and a run on real services."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent.hardware.probe import HardwareFacts
from agent.service.doctor import (
    CheckResult,
    HttpAnswer,
    Observations,
    doctor,
    evaluate,
    list_credentials,
    observe,
    run_checks,
)
from agent.settings import AgentSettings
from shared.facts import FactSource, GpuFacts, JetsonFacts
from tests.ports import free_port

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=timezone.utc)
NO_GPU = HardwareFacts(
    jetson=None,
    gpu=None,
    tensorrt_version=None,
    sources={
        "tensorrt": FactSource(available=False, reason="TensorRT not importable (No module)"),
        "cuda": FactSource(available=False, reason="CUDA Python not importable"),
        "jtop": FactSource(available=False, reason="skipped: not a Jetson"),
        "nvpmodel": FactSource(available=False, reason="skipped: not a Jetson"),
    },
)
HEALTHY = Observations(
    broker_url="mqtt://broker:1883",
    broker_error=None,
    controller_url="http://controller:8080",
    controller=HttpAnswer(status_code=200, date=format_datetime(NOW, usegmt=True)),
    local_time=NOW + timedelta(seconds=1),
    credentials=["jetfleet_token"],
    credentials_error=None,
    hardware=HardwareFacts(
        jetson=None,
        gpu=GpuFacts(name="Orin (nvgpu)"),
        tensorrt_version="10.3.0",
        sources={"tensorrt": FactSource(available=True)},
        cuda_device=True,
    ),
    runtime_setting="auto",
    state_dir=Path("/var/lib/jetfleet/agent"),
    free_bytes=50 * 2**30,
    engine_cache_bytes=2 * 2**30,
)


def verdicts(obs: Observations) -> dict[str, CheckResult]:
    return {r.name: r for r in run_checks(obs)}


def test_a_healthy_gateway_passes_every_check() -> None:
    results = run_checks(HEALTHY)
    assert [r.status for r in results] == ["ok"] * 9
    assert verdicts(HEALTHY)["tensorrt"].detail == "TensorRT 10.3.0"
    assert evaluate(results) == 0


def test_unreachable_broker_blocks_serving_and_names_the_fix() -> None:
    obs = replace(HEALTHY, broker_error="[Errno 111] Connection refused")
    check = verdicts(obs)["broker"]
    assert check.status == "fail"
    assert "Connection refused" in check.detail
    assert "broker_url" in check.fix
    assert evaluate(run_checks(obs)) == 1


def test_controller_unreachable_or_unhealthy_fails() -> None:
    down = verdicts(replace(HEALTHY, controller=HttpAnswer(error="timed out")))
    assert down["controller"].status == "fail"
    assert "controller_url" in down["controller"].fix
    assert down["clock"].status == "warn"
    sick = verdicts(replace(HEALTHY, controller=HttpAnswer(status_code=500)))
    assert sick["controller"].detail.endswith("HTTP 500")


def test_no_credentials_is_a_not_enrolled_warning_only() -> None:
    obs = replace(HEALTHY, credentials=[])
    check = verdicts(obs)["credentials"]
    assert (check.status, check.detail) == ("warn", "not enrolled: no credentials found")
    assert evaluate(run_checks(obs)) == 0


def test_missing_tensorrt_warns_on_auto_and_fails_when_required() -> None:
    auto = verdicts(replace(HEALTHY, hardware=NO_GPU))
    assert auto["tensorrt"].status == "warn"
    assert "ONNX Runtime" in auto["tensorrt"].detail
    assert "python3-libnvinfer" in auto["tensorrt"].fix
    assert auto["cuda"].status == "warn"
    forced = replace(HEALTHY, hardware=NO_GPU, runtime_setting="tensorrt")
    assert verdicts(forced)["tensorrt"].status == "fail"
    assert verdicts(forced)["cuda"].status == "fail"
    assert evaluate(run_checks(forced)) == 1
    cpu = verdicts(replace(HEALTHY, hardware=NO_GPU, runtime_setting="onnxruntime"))
    assert cpu["tensorrt"].status == cpu["cuda"].status == "ok"


def test_jetson_tools_matter_only_on_a_jetson() -> None:
    jetson_hw = replace(
        NO_GPU,
        jetson=JetsonFacts(module="Jetson Orin Nano 8GB"),
        sources={
            "jtop": FactSource(available=False, reason="jtop service not running"),
            "nvpmodel": FactSource(available=False, reason="nvpmodel not installed"),
        },
    )
    on_jetson = verdicts(replace(HEALTHY, hardware=jetson_hw))
    assert on_jetson["jtop"].status == "warn"
    assert "jtop.service" in on_jetson["jtop"].fix
    assert on_jetson["nvpmodel"].status == "warn"
    elsewhere = verdicts(replace(HEALTHY, hardware=NO_GPU))
    assert elsewhere["jtop"].status == elsewhere["nvpmodel"].status == "ok"


def test_disk_thresholds() -> None:
    assert verdicts(replace(HEALTHY, free_bytes=100 * 2**20))["disk"].status == "fail"
    assert verdicts(replace(HEALTHY, free_bytes=1 * 2**30))["disk"].status == "warn"
    missing = verdicts(replace(HEALTHY, free_bytes=None, free_error="denied"))["disk"]
    assert missing.status == "fail"
    assert "install -d" in missing.fix


def test_clock_skew_is_measured_against_the_date_header() -> None:
    skewed = verdicts(replace(HEALTHY, local_time=NOW + timedelta(minutes=3)))["clock"]
    assert skewed.status == "warn"
    assert skewed.detail == "+180 s against the controller"
    assert "timedatectl" in skewed.fix
    behind = verdicts(replace(HEALTHY, local_time=NOW - timedelta(seconds=2)))["clock"]
    assert (behind.status, behind.detail) == ("ok", "-2 s against the controller")


def test_credentials_come_from_the_systemd_credentials_directory(tmp_path: Path) -> None:
    (tmp_path / "jetfleet_token").write_text("x")
    assert list_credentials({"CREDENTIALS_DIRECTORY": str(tmp_path)}) == (["jetfleet_token"], None)
    missing = {"CREDENTIALS_DIRECTORY": str(tmp_path / "absent")}
    assert list_credentials(missing) == ([], None)


class _Healthz(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"status": "ok"}' if self.path == "/healthz" else b"{}"
        self.send_response(200 if self.path == "/healthz" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def controller_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Healthz)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_observe_real_broker_controller_and_disk(
    mosquitto: str, controller_url: str, tmp_path: Path
) -> None:
    settings = AgentSettings(
        broker_url=mosquitto, controller_url=controller_url, state_dir=tmp_path / "state"
    )
    obs = observe(settings, hardware=lambda: NO_GPU)
    checks = verdicts(obs)
    assert checks["broker"].status == "ok"
    assert checks["controller"].status == "ok"
    assert checks["clock"].status == "ok"
    assert checks["disk"].status in ("ok", "warn")
    assert str(tmp_path / "state") in checks["disk"].detail

    closed = AgentSettings(
        broker_url=f"mqtt://127.0.0.1:{free_port()}",
        controller_url=f"http://127.0.0.1:{free_port()}",
        state_dir=tmp_path,
    )
    down = verdicts(observe(closed, hardware=lambda: NO_GPU))
    assert down["broker"].status == down["controller"].status == "fail"


def test_doctor_command_json_and_exit_code(
    mosquitto: str, controller_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(
        f'broker_url = "{mosquitto}"\ncontroller_url = "{controller_url}"\n'
        f'state_dir = "{tmp_path}"\nruntime = "onnxruntime"\n'
    )
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path / "creds"))
    result = CliRunner().invoke(doctor, ["--config", str(config), "--json"])
    checks = {c["name"]: c for c in json.loads(result.output)}
    assert result.exit_code == 0, result.output
    assert checks["credentials"]["detail"] == "not enrolled: no credentials found"
    assert checks["tensorrt"]["status"] == "ok"

    monkeypatch.setenv("JETFLEET_BROKER_URL", f"mqtt://127.0.0.1:{free_port()}")
    text = CliRunner().invoke(doctor, ["--config", str(config)])
    assert text.exit_code == 1
    assert "FAIL broker" in text.output
    assert "fix: start the broker" in text.output
