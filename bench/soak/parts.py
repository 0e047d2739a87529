"""The processes of a soak run: its own Mosquitto, ``jetfleet serve``, agents behind link
proxies, inference clients that keep sending, and simulated gateways for load.

Every process is started, killed (``kill -9``) and stopped by pid; logs go to ``<work>/logs``.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.soak.proxy import LinkProxy
from controller.client.http import ControllerClient
from controller.demo.fleet import Process, _create_admin_token, _spawn, wait_for
from controller.demo.ports import free_port
from shared.topics import Topics

MODEL = "classifier"
INFER_BODY = {
    "inputs": [{"name": "image", "shape": [1, 3, 32, 32], "datatype": "FP32", "data": [0.5] * 3072}]
}


def mosquitto_exe() -> str:
    exe = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    if not os.path.exists(exe):
        raise SystemExit("the soak bench needs Mosquitto: apt-get install mosquitto")
    return exe


class BrokerError(RuntimeError):
    """The bench's Mosquitto did what a real deployment's must not (it did not save its state)."""


class Broker:
    """Its own Mosquitto on a free port (persistence on, as Debian's packaged config has it).

    It runs as the bench's own user (``user``): started as root, Mosquitto would switch to the
    ``mosquitto`` user, which cannot write the persistence file into the bench's directory, so
    every restart would lose the controller's persistent session and what was queued for it
    (``Error saving in-memory database ... Permission denied`` in its log; the soak runs before
    2026-12-02 08:00 had that). :meth:`check_saved` fails a run whose broker did not save.
    """

    def __init__(self, work: Path) -> None:
        self.port = free_port()
        self.dir = work / "mosquitto"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.conf = self.dir / "mosquitto.conf"
        self.conf.write_text(
            f"user {getpass.getuser()}\n"
            f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence true\n"
            f"persistence_location {self.dir}/\nautosave_interval 5\nmax_queued_messages 10000\n"
        )
        self.log = work / "logs" / "mosquitto.log"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc and self.proc.poll() is None else None

    def start(self) -> None:
        with self.log.open("ab") as fh:
            self.proc = subprocess.Popen(
                [mosquitto_exe(), "-c", str(self.conf)], stdout=fh, stderr=subprocess.STDOUT
            )
        self.starts += 1
        wait_for("mosquitto to listen", lambda: _listening(self.port), 20)

    def check_saved(self) -> None:
        """After a stop: BrokerError unless Mosquitto saved its in-memory database."""
        log = self.log.read_text(errors="replace") if self.log.exists() else ""
        failed = [line for line in log.splitlines() if "Error saving" in line]
        if failed or not (self.dir / "mosquitto.db").exists():
            raise BrokerError(
                f"Mosquitto did not save its persistence file in {self.dir}: "
                f"{failed[-1] if failed else 'no mosquitto.db'} (see {self.log})"
            )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _listening(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class ControllerProc:
    """``jetfleet serve`` on a fixed port, so a restart after kill -9 keeps its address."""

    def __init__(self, work: Path, db_url: str, broker_url: str, prefix: str) -> None:
        self.work = work
        self.db_url = db_url
        self.broker_url = broker_url
        self.prefix = prefix
        self.port = free_port()
        self.token = _create_admin_token(db_url)
        self.proc: Process | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.popen.pid if self.proc and self.proc.popen.poll() is None else None

    def client(self) -> ControllerClient:
        return ControllerClient(self.url, token=self.token, ambient_credentials=False)

    def start(self, timeout: float = 90.0) -> None:
        argv = [sys.executable, "-m", "controller", "serve", "--auto-migrate"]
        argv += ["--http", f"127.0.0.1:{self.port}", "--data-dir", str(self.work / "ctl")]
        argv += ["--broker-admin", "none", "--broker", self.broker_url, "--db", self.db_url]
        argv += ["--topic-prefix", self.prefix]
        self.starts += 1
        self.proc = _spawn(f"controller-{self.starts}", argv, self.work / "logs", {})
        wait_for(
            "the controller's /healthz",
            lambda: httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200,
            timeout,
            [self.proc],
        )

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.popen.kill()
            self.proc.popen.wait(10)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop(20)


@dataclass
class AgentProc:
    """One real agent (``jetfleet-agent run``) whose broker link goes through ``proxy``."""

    index: int
    device_id: str
    work: Path
    proxy: LinkProxy
    controller_url: str
    token: str
    prefix: str
    telemetry_interval_s: float
    serve_port: int = field(default_factory=free_port)
    proc: Process | None = None
    starts: int = 0

    @property
    def state_dir(self) -> Path:
        return self.work / "agents" / self.device_id

    @property
    def serve_url(self) -> str:
        return f"http://127.0.0.1:{self.serve_port}"

    @property
    def pid(self) -> int | None:
        return self.proc.popen.pid if self.proc and self.proc.popen.poll() is None else None

    def logs(self) -> list[Path]:
        return sorted((self.work / "logs").glob(f"{self.device_id}-*.log"))

    def start(self) -> None:
        env = {
            "JETFLEET_DEVICE_ID": self.device_id,
            "JETFLEET_BROKER_URL": self.proxy.url,
            "JETFLEET_STATE_DIR": str(self.state_dir),
            "JETFLEET_SERVE_ADDRESS": f"127.0.0.1:{self.serve_port}",
            "JETFLEET_SIMULATED_PROFILE": "orin-nano-8gb",
            "JETFLEET_TELEMETRY_INTERVAL_S": str(self.telemetry_interval_s),
            "JETFLEET_CONTROLLER_URL": self.controller_url,
            "JETFLEET_API_TOKEN": self.token,
            "JETFLEET_TOPIC_PREFIX": self.prefix,
        }
        argv = [sys.executable, "-c", "from agent.cli import main; main()", "run"]
        self.starts += 1
        self.proc = _spawn(f"{self.device_id}-{self.starts}", argv, self.work / "logs", env)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.popen.kill()
            self.proc.popen.wait(10)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop(30)

    def ready(self) -> bool:
        """The agent answers inference for the model (any version)."""
        try:
            r = httpx.get(f"{self.serve_url}/v2/models/{MODEL}/ready", timeout=2)
        except httpx.HTTPError:
            return False
        return r.status_code == 200


@dataclass(frozen=True)
class Request:
    """One inference request a client sent: when, to which agent, and how it ended."""

    t: float
    agent: int
    ok: bool
    error: str = ""


class InferenceClients:
    """One thread per agent that keeps sending inference requests (a camera's frames)."""

    def __init__(self, agents: list[AgentProc], pause_s: float = 0.05) -> None:
        self.agents = agents
        self.pause_s = pause_s
        self.records: list[Request] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(a,), name=f"infer-{a.index}", daemon=True)
            for a in agents
        ]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)

    def _run(self, agent: AgentProc) -> None:
        with httpx.Client(timeout=10) as http:
            while not self._stop.is_set():
                t = time.monotonic()
                try:
                    r = http.post(f"{agent.serve_url}/v2/models/{MODEL}/infer", json=INFER_BODY)
                    ok, error = r.status_code == 200, "" if r.status_code == 200 else r.text[:200]
                    if not ok:
                        error = f"HTTP {r.status_code}: {error}"
                except httpx.HTTPError as exc:
                    ok, error = False, f"{type(exc).__name__}: {exc}"[:200]
                with self._lock:
                    self.records.append(Request(t, agent.index, ok, error))
                self._stop.wait(self.pause_s)


class SimGateways:
    """Lightweight simulated gateways (paho clients) on the broker, for load and convergence."""

    def __init__(self, broker_url: str, prefix: str, count: int, token: str) -> None:
        from tests.integration.rollouts.sim_agents import SimAgent

        self.ids = [f"sim-{i:03d}-{uuid.uuid4().hex[:4]}" for i in range(count)]
        self.agents = [
            SimAgent(broker_url, Topics(prefix), d, {"fleet": "soak"}, token=token)
            for d in self.ids
        ]

    def start(self) -> None:
        for agent in self.agents:
            agent.start()

    def stop(self) -> None:
        for agent in self.agents:
            agent.stop()


class PhaseWatch:
    """Follows every device's reported slot phases straight from the broker (not through a
    proxy), so the bench can kill an agent while it downloads or swaps."""

    def __init__(self, broker_url: str, prefix: str) -> None:
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        from controller.settings import parse_broker_url

        self.topics = Topics(prefix)
        self._cond = threading.Condition()
        self.phases: dict[str, tuple[float, str]] = {}
        """device → (when seen, the phase of its model slot)."""
        host, port = parse_broker_url(broker_url)
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2, client_id=f"soak-watch-{uuid.uuid4().hex[:6]}"
        )
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.client.reconnect_delay_set(1, 2)
        self.client.connect_async(host, port, keepalive=10)

    def start(self) -> None:
        self.client.loop_start()

    def stop(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    def _on_connect(self, client: object, *_args: object) -> None:
        self.client.subscribe(f"{self.topics.prefix}/+/reported", qos=1)

    def _on_message(self, _client: object, _userdata: object, msg: object) -> None:
        import json

        try:
            doc = json.loads(msg.payload)  # type: ignore[attr-defined]
        except ValueError:
            return
        for slot in doc.get("slots", []):
            if slot.get("name") == MODEL:
                with self._cond:
                    self.phases[doc.get("device_id", "")] = (time.monotonic(), slot.get("phase"))
                    self._cond.notify_all()

    def wait_phase(self, device: str, phases: set[str], timeout: float) -> str | None:
        """Block until ``device`` reports one of ``phases``; that phase, or None on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                seen = self.phases.get(device)
                if seen is not None and seen[1] in phases:
                    return seen[1]
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)

    def clear(self, device: str) -> None:
        with self._cond:
            self.phases.pop(device, None)
