"""N real ``jetfleet serve`` processes on one fresh PostgreSQL database and the real Mosquitto.

Each replica is started the way a deployment starts it: the schema is upgraded once first
(``jetfleet db upgrade``), then every replica runs ``jetfleet serve`` with the same database,
broker, topic prefix and data directory (the artifact store and the fleet signing key on a
shared mount; ``test_object_store_replicas`` gives each its own and an S3 bucket) and its own
HTTP port; they start at the same time. Each one's log goes to
``<tmp>/replica-<i>.log``; a test that fails shows the tail of every log.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from controller.demo.stopping import stop
from controller.settings import ROLLOUT_LEASE_TTL_ENV
from tests.integration.controller.conftest import bearer, poll
from tests.ports import free_port

LEASE_TTL_S = 3.0
"""The rollout lease TTL the replicas run with (``JETFLEET_ROLLOUT_LEASE_TTL_S``)."""
START_TIMEOUT_S = 60.0


class Replica:
    """One ``jetfleet serve`` process."""

    def __init__(self, index: int, args: list[str], env: dict[str, str], log: Path) -> None:
        self.index = index
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        self._args = [*args, "--http", f"127.0.0.1:{self.port}"]
        self._env = env
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Replica:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self._args,
                env=self._env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: its children end with it
            )
        return self

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def ready(self) -> bool:
        """True once ``/healthz`` answers; fails the test if the process ended."""
        if not self.alive:
            pytest.fail(f"replica {self.index} exited early:\n{self.tail()}", pytrace=False)
        try:
            return httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def kill9(self) -> None:
        """``kill -9`` the serve process (its children are left, as on a real host)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL what is left after 15 s."""
        if self.process is None:
            return
        stop(self.process, 15.0, group=True)

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.text().splitlines()[-lines:])

    def holder(self) -> str | None:
        """The lease holder name this replica logged when it took the rollout lease."""
        for line in self.text().splitlines():
            if "runs the rollouts (lease taken)" in line:
                return line.split(": ", 1)[1].split(" ", 1)[0]
        return None


class Cluster:
    """The replicas of one test, their shared settings and an admin token."""

    def __init__(self, db_url: str, broker_url: str, tmp: Path) -> None:
        self.db_url = db_url
        self.broker_url = broker_url
        self.run_id = uuid.uuid4().hex[:10]
        self.prefix = f"jftest/{self.run_id}"
        self.data_dir = tmp / "shared-data"
        self.tmp = tmp
        self.replicas: list[Replica] = []
        self.token = ""

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("JETFLEET_")}
        env[ROLLOUT_LEASE_TTL_ENV] = str(LEASE_TTL_S)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def own_args(self, index: int) -> list[str]:
        """The options of replica ``index`` beyond the shared ones: here its data directory,
        one shared mount for all (a variant without a shared disk gives each its own)."""
        return ["--data-dir", str(self.data_dir)]

    def start(self, n: int) -> list[Replica]:
        """Upgrade the schema once, then start ``n`` replicas at once and wait for all."""
        cli = [sys.executable, "-m", "controller"]
        subprocess.run(
            [*cli, "db", "upgrade", "--db", self.db_url],
            env=self._env(),
            check=True,
            capture_output=True,
            timeout=120,
        )
        args = [
            *cli,
            "serve",
            "--db",
            self.db_url,
            "--broker",
            self.broker_url,
            "--topic-prefix",
            self.prefix,
        ]
        first = len(self.replicas)
        for i in range(first, first + n):
            log = self.tmp / f"replica-{i}.log"
            # A stable name per replica, as a deployment gives each one: its telemetry sessions
            # on the broker keep it, and the replicas split telemetry (a shared subscription).
            named = [*args, "--replica-id", f"{self.run_id}-r{i}", *self.own_args(i)]
            self.replicas.append(Replica(i, named, self._env(), log).start())
        for replica in self.replicas[first:]:
            poll(replica.ready, START_TIMEOUT_S, f"replica {replica.index} to answer /healthz")
        if not self.token:
            self.token = (self.data_dir / "admin-token").read_text(encoding="utf-8").strip()
        return self.replicas[first:]

    def api(self, replica: Replica, timeout: float = 30) -> httpx.Client:
        """An admin HTTP client of one replica."""
        return httpx.Client(base_url=replica.url, timeout=timeout, headers=bearer(self.token))

    def stop(self) -> None:
        for replica in self.replicas:
            replica.stop()

    def logs(self) -> str:
        return "\n".join(f"--- replica {r.index} ---\n{r.tail()}" for r in self.replicas)


@pytest.fixture
def cluster(
    postgres_url: str, mosquitto: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Cluster]:
    """Replicas on a fresh PostgreSQL database and the real Mosquitto; start them with
    ``cluster.start(n)``; all are stopped (and their logs shown on failure) after the test."""
    c = Cluster(postgres_url, mosquitto, tmp_path)
    try:
        yield c
    finally:
        c.stop()
        failed = getattr(request.node, "rep_call", None)
        if failed is not None and failed.failed:
            print(c.logs())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
