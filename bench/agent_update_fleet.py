"""The parts of ``bench/agent_update.py``: a real controller, real agents started through the
launcher under a stand-in for systemd, release archives, the operator's CLI, and inference load.

- :class:`Fleet` runs ``jetfleet serve`` (SQLite in its data dir, the embedded broker with
  per-device credentials), enrols each gateway with a one-time token (the agent's own
  enrolment code: identity and pinned fleet key in its state dir), and starts each agent as
  ``packaging/scripts/agent-launch run`` under :class:`tests.integration.agent_update.gateway.
  Supervisor` (systemd's ``Restart=on-failure``). The factory release the launcher falls back
  to is a release tree of the current version (:func:`tests.agent_releases.make_release_tree`).
- :class:`Load` is one client thread per device posting KServe v2 inference requests on a
  keep-alive connection, paced, counting what failed and why.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from agent.link.enrolment import EnrolmentError, enroll
from agent.settings import AgentSettings
from controller.demo.fleet import (
    Process,
    _create_admin_token,
    _spawn,
    wait_for,
)
from controller.demo.ports import free_port
from controller.settings import default_db_url
from tests.agent_releases import make_release_archive, make_release_tree
from tests.integration.agent_update.gateway import Supervisor

ROOT = Path(__file__).resolve().parent.parent
JETFLEET = Path(sys.executable).with_name("jetfleet")
LABELS = {"fleet": "agent-bench"}
MODEL = "classifier"
INFER_BODY = orjson.dumps(
    {
        "inputs": [
            {"name": "image", "shape": [1, 3, 32, 32], "datatype": "FP32", "data": [0.5] * 3072}
        ]
    }
)


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("JETFLEET_")}


@dataclass
class Gateway:
    """One device: its id, state dir, KServe URL and the supervisor running its launcher."""

    device_id: str
    state: Path
    port: int
    supervisor: Supervisor | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.state / "agent.log"

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"


@dataclass
class Fleet:
    """The controller, the release files and the gateways of one bench run."""

    workdir: Path
    version: str
    """The current version: the factory release every gateway starts from."""
    telemetry_interval_s: float = 2.0
    http_port: int = field(default_factory=free_port)
    broker_port: int = field(default_factory=free_port)
    controller: Process | None = None
    token: str = ""
    gateways: list[Gateway] = field(default_factory=list)
    cli_log: list[str] = field(default_factory=list)
    """Every CLI command run, as typed (without the token)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def start_controller(self, timeout: float = 90.0) -> None:
        data_dir = self.workdir / "ctl"
        self.token = _create_admin_token(default_db_url(data_dir))
        # the fleet key: releases and documents signed, pinned by each agent at enrolment
        keys = [str(JETFLEET), "keys", "init", "--data-dir", str(data_dir)]
        self._note(keys[1:])
        subprocess.run(keys, env=_clean_env(), capture_output=True, check=True, timeout=120)
        argv = [sys.executable, "-m", "controller", "serve", "--auto-migrate"]
        argv += ["--http", f"127.0.0.1:{self.http_port}", "--data-dir", str(data_dir)]
        argv += ["--embedded-broker", f"127.0.0.1:{self.broker_port}"]
        self.controller = _spawn("controller", argv, self.workdir / "logs", _clean_env())
        wait_for(
            "the controller's /healthz",
            lambda: httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200,
            timeout,
            [self.controller],
        )

    def _note(self, args: Iterable[str]) -> None:
        self.cli_log.append(" ".join(["jetfleet", *args]).replace(str(self.workdir), "$WORK"))

    def api(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.token}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``jetfleet ARGS --url …`` as an operator types it (the token in the environment)."""
        argv = [str(JETFLEET) if JETFLEET.exists() else "jetfleet", *args, "--url", self.url]
        self._note(args)
        env = _clean_env() | {"JETFLEET_TOKEN": self.token}
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        if check and done.returncode != 0:
            raise RuntimeError(f"`jetfleet {' '.join(args)}` failed:\n{done.stdout}{done.stderr}")
        return done

    def release(self, version: str, broken: bool = False) -> Path:
        """The release tree of ``version`` as a ``.tar.gz`` file to push."""
        path = self.workdir / "releases" / f"jetfleet-agent-{version}.tar.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(make_release_archive(self.workdir / "release-src", version, broken))
        return path

    def enrol(self, device_ids: Iterable[str]) -> None:
        """Enrol each gateway with its own one-time token (the agent's enrolment code)."""
        factory = make_release_tree(self.workdir / "factory" / self.version, self.version)
        self._factory_entry = factory / "bin" / "jetfleet-agent"
        with self.api() as api:
            for device_id in device_ids:
                body = {"labels": LABELS, "expires_in_s": 3600, "device_id": device_id}
                made = api.post("/api/v1/enrol-tokens", json=body)
                made.raise_for_status()
                state = self.workdir / "gateways" / device_id
                settings = AgentSettings(state_dir=state)
                while True:
                    try:
                        enroll(settings, self.url, made.json()["token"], device_id)
                        break
                    except EnrolmentError as exc:  # the per-address rate limit (10 a minute)
                        if "HTTP 429" not in str(exc):
                            raise
                        time.sleep(2)
                self.gateways.append(Gateway(device_id, state, free_port()))

    def start_gateways(self) -> None:
        for gw in self.gateways:
            env = _clean_env() | {
                "JETFLEET_STATE_DIR": str(gw.state),
                "JETFLEET_SERVE_ADDRESS": f"127.0.0.1:{gw.port}",
                "JETFLEET_RUNTIME": "onnxruntime",
                "JETFLEET_DISABLED_COLLECTORS": '["jetson", "jtop", "nvml"]',
                "JETFLEET_TELEMETRY_INTERVAL_S": str(self.telemetry_interval_s),
                "JETFLEET_RELEASES_DIR": str(gw.state / "releases"),
                "JETFLEET_FACTORY_ENTRY": str(self._factory_entry),
            }
            gw.supervisor = Supervisor(env, gw.log)

    def devices(self) -> dict[str, dict[str, Any]]:
        with self.api() as api:
            answer = api.get("/api/v1/devices")
            answer.raise_for_status()
            return {d["id"]: d for d in answer.json()}

    def wait(self, what: str, check: Callable[[], Any], timeout: float) -> Any:
        """Poll ``check`` until truthy; on timeout, fail with the gateways' log tails."""
        procs = [self.controller] if self.controller else []
        try:
            return wait_for(what, check, timeout, procs, interval=0.5)
        except RuntimeError as exc:
            tails = "\n".join(f"--- {g.device_id}:\n{g.tail(1500)}" for g in self.gateways)
            raise RuntimeError(f"{exc}\n{tails}") from exc

    def stop(self) -> None:
        for gw in self.gateways:
            if gw.supervisor is not None:
                gw.supervisor.stop()
        if self.controller is not None:
            self.controller.stop()


class Load:
    """One client thread per gateway posting inference requests until stopped (paced to
    ``rate`` per second each), counting sent and failed requests."""

    def __init__(self, gateways: list[Gateway], rate: float) -> None:
        self.sent = 0
        self.failed = 0
        self.why: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._period = 1.0 / rate if rate > 0 else 0.0
        self._threads = [
            threading.Thread(target=self._run, args=(gw,), daemon=True, name=gw.device_id)
            for gw in gateways
        ]
        for thread in self._threads:
            thread.start()

    def counts(self) -> tuple[int, int]:
        with self._lock:
            return self.sent, self.failed

    def _run(self, gw: Gateway) -> None:
        url = f"{gw.url}/v2/models/{MODEL}/infer"
        headers = {"Content-Type": "application/json"}
        with httpx.Client(timeout=60) as http:
            while not self._stop.is_set():
                began = time.monotonic()
                why = None
                try:
                    answer = http.post(url, content=INFER_BODY, headers=headers)
                    if answer.status_code != 200:
                        why = f"HTTP {answer.status_code}"
                except httpx.HTTPError as exc:
                    why = type(exc).__name__
                with self._lock:
                    self.sent += 1
                    if why is not None:
                        self.failed += 1
                        self.why[f"{gw.device_id}: {why}"] += 1
                rest = self._period - (time.monotonic() - began)
                if rest > 0:
                    self._stop.wait(rest)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            with contextlib.suppress(RuntimeError):
                thread.join(90)
