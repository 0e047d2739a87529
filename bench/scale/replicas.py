"""Controller replicas as processes: ``jetfleet serve`` on one database, one broker (dynamic
security, the controller's credential) and one data directory, each with its own HTTP port and
replica id (``JETFLEET_REPLICA_ID``), killed with -9 and started again the way systemd's
``Restart=on-failure`` would, with the same id and port."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from controller.demo.ports import free_port
from controller.demo.stopping import stop
from controller.settings import ROLLOUT_LEASE_TTL_ENV

REPLICA_ID_ENV = "JETFLEET_REPLICA_ID"
LEASE_LINE = "runs the rollouts (lease taken)"


class Replica:
    """One ``jetfleet serve`` process; ``starts`` counts its lives (logs ``<id>-<n>.log``)."""

    def __init__(self, replica_id: str, args: list[str], env: dict[str, str], logs: Path) -> None:
        self.replica_id = replica_id
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._args = [*args, "--http", f"127.0.0.1:{self.port}"]
        self._env = {**env, REPLICA_ID_ENV: replica_id}
        self._logs = logs
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.log = logs / f"{replica_id}-0.log"

    def start(self) -> Replica:
        self.starts += 1
        self.log = self._logs / f"{self.replica_id}-{self.starts}.log"
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self._args,
                env=self._env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return self

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.alive and self.process is not None else None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def ready(self) -> bool:
        if not self.alive:
            raise SystemExit(f"replica {self.replica_id} exited:\n{self.tail()}")
        try:
            return httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready():
            if time.monotonic() > deadline:
                raise SystemExit(f"replica {self.replica_id} not ready:\n{self.tail()}")
            time.sleep(0.2)

    def kill9(self) -> None:
        """``kill -9`` of the serve process only (its children are left, as on a real host)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        """SIGTERM to its process group, SIGKILL to what is left after 20 s."""
        if self.process is None:
            return
        stop(self.process, 20.0, group=True)

    def holders(self) -> list[str]:
        """Lease holder names this replica logged when it took the rollout lease (all lives)."""
        found = []
        for log in sorted(self._logs.glob(f"{self.replica_id}-*.log")):
            for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
                if LEASE_LINE in line:
                    found.append(line.split(": ", 1)[1].split(" ", 1)[0])
        return found

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def replica_set(
    count: int,
    *,
    db_url: str,
    broker_url: str,
    broker_user: str,
    password_file: Path,
    data_dir: Path,
    prefix: str,
    lease_ttl_s: float,
    logs: Path,
    ingest_workers: int = 0,
) -> list[Replica]:
    """``count`` replicas r1..rN, not started."""
    args = [sys.executable, "-m", "controller", "serve", "--db", db_url, "--broker", broker_url]
    args += ["--broker-admin", "dynsec", "--broker-user", broker_user]
    args += ["--broker-password-file", str(password_file), "--data-dir", str(data_dir)]
    args += ["--topic-prefix", prefix, "--ingest-workers", str(ingest_workers)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("JETFLEET_")}
    env[ROLLOUT_LEASE_TTL_ENV] = f"{lease_ttl_s:g}"
    env["PYTHONUNBUFFERED"] = "1"
    logs.mkdir(parents=True, exist_ok=True)
    return [Replica(f"r{i + 1}", args, env, logs) for i in range(count)]


def leader_of(replicas: list[Replica], holder: str) -> Replica | None:
    """The replica whose log names ``holder`` (or whose id starts it: ``<replica id>-...``)."""
    for r in replicas:
        if holder in r.holders():
            return r
    for r in replicas:
        if holder.startswith(f"{r.replica_id}-"):
            return r
    return None
