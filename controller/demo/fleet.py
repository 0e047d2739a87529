"""The demo fleet: one controller and N simulated gateways as real processes on this machine.

Used by ``jetfleet demo`` and by the end-to-end test. Every process is real (controller with its
database and broker, agents with ONNX Runtime and KServe v2); only the agents' hardware facts are
simulated, and they say so.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from controller.client.http import ControllerClient
from controller.demo.ports import free_port
from controller.demo.stopping import stop
from controller.settings import default_db_url

DATATYPES = {"FP32": np.float32, "FP16": np.float16, "INT64": np.int64, "INT32": np.int32}


class DemoError(RuntimeError):
    """The demo could not reach a state in time; the message says which and where the logs are."""


@dataclass(frozen=True)
class GatewaySpec:
    """One simulated gateway: id, simulated profile name, and the labels the operator gives it
    once it reports (:meth:`DemoFleet.label_gateways`; a gateway cannot label itself)."""

    device_id: str
    profile: str
    labels: dict[str, str]


DEMO_GATEWAYS = (
    GatewaySpec("gw-orin-nano-01", "orin-nano-8gb", {"fleet": "demo", "site": "line-1"}),
    GatewaySpec("gw-orin-nx-01", "orin-nx-16gb", {"fleet": "demo", "site": "line-2"}),
    GatewaySpec("gw-x86-rtx-01", "x86-rtx", {"fleet": "demo", "site": "lab"}),
)


@dataclass
class Process:
    """A child process with its log file; stopped by SIGTERM, then SIGKILL."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def stop(self, timeout: float = 10.0) -> None:
        stop(self.popen, timeout, kill_wait_s=timeout)

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def _spawn(name: str, argv: list[str], log_dir: Path, env: dict[str, str]) -> Process:
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{name}.log"
    with log.open("wb") as fh:
        popen = subprocess.Popen(
            argv, stdout=fh, stderr=subprocess.STDOUT, env={**os.environ, **env}
        )
    return Process(name, popen, log)


def wait_for(
    what: str,
    check: Callable[[], Any],
    timeout: float,
    procs: Iterable[Process] = (),
    interval: float = 0.2,
) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` and dead processes."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.popen.poll() is not None:
                raise DemoError(
                    f"{proc.name} exited with code {proc.popen.returncode} while waiting for "
                    f"{what}; last lines of {proc.log}:\n{proc.tail()}"
                )
        try:
            result = check()
        except (httpx.HTTPError, OSError, KeyError) as exc:
            last_error, result = exc, None
        if result:
            return result
        time.sleep(interval)
    hint = f" (last error: {last_error})" if last_error else ""
    raise DemoError(f"timed out after {timeout:.0f}s waiting for {what}{hint}")


@dataclass
class DemoFleet:
    """Starts and stops the controller and the gateways; knows their addresses."""

    workdir: Path
    broker_url: str | None = None
    db_url: str | None = None
    topic_prefix: str | None = None
    telemetry_interval_s: float = 2.0
    http_port: int = field(default_factory=free_port)
    processes: list[Process] = field(default_factory=list)
    controller: Process | None = None
    auth: bool = True
    """False runs the controller with --insecure-no-auth (agents then need no token)."""
    admin_token: str | None = None
    """The demo's own admin token, created in the database before the controller starts."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def start_controller(self, timeout: float = 60.0) -> None:
        data_dir = self.workdir / "ctl"
        argv = [sys.executable, "-m", "controller", "serve", "--auto-migrate"]
        argv += ["--http", f"127.0.0.1:{self.http_port}", "--data-dir", str(data_dir)]
        if self.auth:
            self.admin_token = _create_admin_token(self.db_url or default_db_url(data_dir))
        else:
            argv.append("--insecure-no-auth")
        argv += ["--broker-admin", "none"]  # simulated gateways connect without enrolling
        if self.broker_url:
            argv += ["--broker", self.broker_url]
        else:
            broker_port = free_port()
            argv += ["--embedded-broker", f"127.0.0.1:{broker_port}"]
            self.broker_url = f"mqtt://127.0.0.1:{broker_port}"
        if self.db_url:
            argv += ["--db", self.db_url]
        if self.topic_prefix:
            argv += ["--topic-prefix", self.topic_prefix]
        self.controller = _spawn("controller", argv, self.workdir / "logs", {})
        self.processes.append(self.controller)
        wait_for(
            "the controller's /healthz",
            lambda: httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200,
            timeout,
            [self.controller],
        )

    def start_gateway(self, spec: GatewaySpec, *, engine_store: bool = True) -> Process:
        """Start one agent; ``engine_store=False`` leaves it without the controller's engine
        store, so it builds every engine itself (the benchmarks' baseline)."""
        assert self.broker_url is not None, "start the controller first"
        env = {
            "JETFLEET_DEVICE_ID": spec.device_id,
            "JETFLEET_BROKER_URL": self.broker_url,
            "JETFLEET_STATE_DIR": str(self.workdir / "agents" / spec.device_id),
            "JETFLEET_SERVE_ADDRESS": f"127.0.0.1:{free_port()}",
            "JETFLEET_SIMULATED_PROFILE": spec.profile,
            "JETFLEET_TELEMETRY_INTERVAL_S": str(self.telemetry_interval_s),
        }
        if engine_store:
            env["JETFLEET_CONTROLLER_URL"] = self.url
        if self.auth:
            env["JETFLEET_API_TOKEN"] = self.device_token(spec.device_id)
        if self.topic_prefix:
            env["JETFLEET_TOPIC_PREFIX"] = self.topic_prefix
        argv = [sys.executable, "-c", "from agent.cli import main; main()", "run"]
        proc = _spawn(spec.device_id, argv, self.workdir / "logs", env)
        self.processes.append(proc)
        return proc

    def stop(self) -> None:
        """Stop the gateways first (they publish offline), then the controller."""
        for proc in reversed(self.processes):
            proc.stop()

    def client(self) -> ControllerClient:
        """An API client holding the demo's admin token."""
        return ControllerClient(self.url, token=self.admin_token, ambient_credentials=False)

    def label_gateways(self, specs: Iterable[GatewaySpec], timeout: float = 60.0) -> None:
        """Wait until every gateway of ``specs`` is listed, then set its labels as an operator
        does (``jetfleet devices label``): the controller ignores labels devices report."""
        wanted = {s.device_id: s.labels for s in specs}
        with self.client() as client:
            wait_for(
                f"{len(wanted)} gateways to report",
                lambda: {d["id"] for d in client.devices()} >= set(wanted),
                timeout,
                self.processes,
                0.5,
            )
            for device_id, labels in wanted.items():
                client.set_labels(device_id, labels)

    def device_token(self, device_id: str) -> str:
        """A new token of role device for ``device_id`` (what enrolment would hand out)."""
        body = {"name": device_id, "role": "device", "device_id": device_id}
        with self.client() as client:
            return str(client.create_token(body)["token"])

    def viewer_token(self) -> str:
        """A new viewer token (for the dashboard's login link)."""
        with self.client() as client:
            return str(client.create_token({"name": "demo-viewer", "role": "viewer"})["token"])


def _create_admin_token(db_url: str) -> str:
    """Migrate ``db_url`` and store a fresh admin token named ``demo`` in it."""
    from controller.auth.service import AccessControl
    from controller.db import migrate
    from controller.db.session import make_engine
    from controller.db.token_store import TokenStore

    migrate.upgrade(db_url)
    engine = make_engine(db_url)
    try:
        return AccessControl(TokenStore(engine)).create("demo", "admin").token
    finally:
        engine.dispose()


def serving_rows(devices: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(device, model, version) of every slot reported ``serving`` with the desired version."""
    rows = []
    for d in devices:
        desired = {s["name"]: s["version"] for s in d["desired"]}
        for s in d["reported"]:
            if s["phase"] == "serving" and desired.get(s["name"]) == s.get("active_version"):
                rows.append((d["id"], s["name"], s["active_version"]))
    return rows


def all_desired_serving(devices: list[dict[str, Any]]) -> bool:
    """True when every desired slot of every device is serving its desired version."""
    want = sum(len(d["desired"]) for d in devices)
    return want > 0 and len(serving_rows(devices)) == want


def random_inputs(spec: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """A KServe v2 JSON infer body with random data shaped like the model's inputs."""
    inputs = []
    for t in spec["inputs"]:
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in t["shape"]]
        dtype = DATATYPES.get(t["datatype"], np.float32)
        data = rng.standard_normal(int(np.prod(shape))).astype(dtype)
        inputs.append(
            {"name": t["name"], "shape": shape, "datatype": t["datatype"], "data": data.tolist()}
        )
    return {"inputs": inputs}


def infer(serve_url: str, model: str, body: dict[str, Any], http: httpx.Client) -> dict[str, Any]:
    """One KServe v2 inference; raises on any non-200."""
    response = http.post(f"{serve_url}/v2/models/{model}/infer", json=body)
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


def telemetry_totals(samples: list[dict[str, Any]]) -> dict[str, tuple[int, int, float | None]]:
    """Per model over stored samples: (requests, errors, p50 of the newest sample with traffic)."""
    totals: dict[str, tuple[int, int, float | None]] = {}
    for sample in sorted(samples, key=lambda s: str(s["ts"])):
        for m in sample["models"]:
            requests, errors, p50 = totals.get(m["name"], (0, 0, None))
            if m["requests"]:
                p50 = m["latency_p50_ms"]
            totals[m["name"]] = (requests + m["requests"], errors + m["errors"], p50)
    return totals
