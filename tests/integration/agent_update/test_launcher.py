"""packaging/scripts/agent-launch, run for real with stand-in releases (sh scripts).

Each release's entry records what it was started as, then exits with the status the test
chose (or sleeps, for the deadline watchdog). The layout is written by the agent's own code
(agent.update.layout), so the two sides are checked against each other.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from agent.update.layout import Pending, ReleaseLayout
from agent.update.release_meta import ReleaseInfo, canonical_bytes
from tests.integration.agent_update.gateway import LAUNCHER

ENTRY = """#!/bin/sh
echo "$JETFLEET_RELEASE|$JETFLEET_LAUNCHER|$*" >> "{log}"
{action}
"""


def release(layout: ReleaseLayout, version: str, log: Path, action: str = "exit 0") -> None:
    tree = layout.tree(version)
    (tree / "bin").mkdir(parents=True)
    info = ReleaseInfo(version=version, arch="x86_64", python="3.11", entry="bin/run")
    (tree / "release.json").write_bytes(canonical_bytes(info))
    (tree / "bin" / "run").write_text(ENTRY.format(log=log, action=action))
    (tree / "bin" / "run").chmod(0o755)


@pytest.fixture
def layout(tmp_path: Path) -> ReleaseLayout:
    return ReleaseLayout(tmp_path / "releases")


def launch(
    layout: ReleaseLayout, tmp_path: Path, wait: bool = True, serve_fd: int | None = None
) -> subprocess.Popen[bytes]:
    """Run the launcher; ``serve_fd``: a descriptor handed over as the agent's restart does."""
    factory = tmp_path / "factory"
    if not factory.exists():
        factory.write_text(ENTRY.format(log=tmp_path / "log", action="exit 0"))
        factory.chmod(0o755)
    env = dict(os.environ) | {
        "JETFLEET_RELEASES_DIR": str(layout.root),
        "JETFLEET_FACTORY_ENTRY": str(factory),
    }
    if serve_fd is not None:
        env["JETFLEET_SERVE_FD"] = str(serve_fd)
    proc = subprocess.Popen(
        [str(LAUNCHER), "run", "--config", "x.toml"],
        env=env,
        start_new_session=True,
        pass_fds=() if serve_fd is None else (serve_fd,),
    )
    if wait:
        proc.wait(30)
    return proc


def started(tmp_path: Path) -> list[str]:
    log = tmp_path / "log"
    return [line.split("|")[0] for line in log.read_text().splitlines()] if log.exists() else []


def test_without_a_current_release_the_packaged_one_runs(
    layout: ReleaseLayout, tmp_path: Path
) -> None:
    launch(layout, tmp_path)
    line = (tmp_path / "log").read_text().strip()
    assert line == f"factory|{LAUNCHER}|run --config x.toml"


def test_a_confirmed_current_release_runs(layout: ReleaseLayout, tmp_path: Path) -> None:
    release(layout, "0.3.0", tmp_path / "log")
    layout.switch("0.3.0", Pending("0.3.0", int(time.time()) + 60))
    layout.confirm("0.3.0")
    launch(layout, tmp_path)
    assert started(tmp_path) == [str(layout.tree("0.3.0"))]


def test_an_unconfirmed_release_gets_three_starts_then_the_previous_one_runs(
    layout: ReleaseLayout, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    release(layout, "0.3.0", log)
    release(layout, "0.4.0", log, action="exit 3")
    layout.switch("0.3.0", Pending("0.3.0", int(time.time()) + 60))
    layout.confirm("0.3.0")
    layout.switch("0.4.0", Pending("0.4.0", int(time.time()) + 60))
    statuses = [launch(layout, tmp_path).returncode for _ in range(4)]
    assert statuses == [3, 3, 3, 0]
    assert started(tmp_path) == [str(layout.tree("0.4.0"))] * 3 + [str(layout.tree("0.3.0"))]
    assert layout.current() == "0.3.0"
    assert layout.pending() is None
    record = layout.rolled_back()
    assert record is not None
    assert record.version == "0.4.0"
    assert "did not confirm in 3 starts" in record.reason


def test_past_its_deadline_an_unconfirmed_release_is_switched_back_to_the_factory_one(
    layout: ReleaseLayout, tmp_path: Path
) -> None:
    release(layout, "0.3.0", tmp_path / "log")
    layout.switch("0.3.0", Pending("0.3.0", int(time.time()) - 1))
    launch(layout, tmp_path)
    assert started(tmp_path) == ["factory"]
    assert layout.current() is None
    record = layout.rolled_back()
    assert record is not None
    assert "before its deadline" in record.reason


def test_a_pending_record_for_another_release_is_ignored(
    layout: ReleaseLayout, tmp_path: Path
) -> None:
    """The agent died between writing ``pending`` and moving ``current``."""
    release(layout, "0.3.0", tmp_path / "log")
    layout.switch("0.3.0", Pending("0.3.0", int(time.time()) + 60))
    layout.confirm("0.3.0")
    (layout.root / "pending").write_text(f"version=0.4.0\ndeadline={int(time.time()) - 5}\n")
    launch(layout, tmp_path)
    assert started(tmp_path) == [str(layout.tree("0.3.0"))]
    assert layout.rolled_back() is None
    assert not (layout.root / "attempts").exists()


@pytest.mark.parametrize("handed_over", [False, True])
def test_the_watchdog_kills_an_unconfirmed_release_at_its_deadline(
    layout: ReleaseLayout, tmp_path: Path, handed_over: bool
) -> None:
    """Also when the agent restarted by executing the launcher with its listening socket on a
    descriptor above 9, which dash (/bin/sh on Debian and Ubuntu) cannot name."""
    release(layout, "0.3.0", tmp_path / "log", action="exec sleep 60")
    layout.switch("0.3.0", Pending("0.3.0", int(time.time()) + 2))
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        fd = fcntl.fcntl(listening.fileno(), fcntl.F_DUPFD, 10) if handed_over else None
        try:
            proc = launch(layout, tmp_path, wait=False, serve_fd=fd)
        finally:
            if fd is not None:
                os.close(fd)
    try:
        assert proc.wait(15) == -signal.SIGKILL
    finally:
        os.killpg(proc.pid, signal.SIGKILL) if proc.poll() is None else None
    launch(layout, tmp_path)  # what systemd's Restart=on-failure does next
    assert started(tmp_path) == [str(layout.tree("0.3.0")), "factory"]


def test_the_watchdog_stands_down_once_the_release_confirms(
    layout: ReleaseLayout, tmp_path: Path
) -> None:
    release(layout, "0.3.0", tmp_path / "log", action="sleep 4")
    layout.switch("0.3.0", Pending("0.3.0", int(time.time()) + 2))
    proc = launch(layout, tmp_path, wait=False)
    deadline = time.monotonic() + 10
    while not started(tmp_path):  # the launcher started its watchdog before the release
        assert time.monotonic() < deadline, "the release never started"
        time.sleep(0.05)
    layout.confirm("0.3.0")
    assert proc.wait(15) == 0


@pytest.mark.skipif(shutil.which("dpkg") is None, reason="needs dpkg (Debian/Ubuntu)")
def test_apt_installing_the_package_resets_to_it_unless_the_fleet_runs_newer(
    layout: ReleaseLayout, tmp_path: Path
) -> None:
    """What the package's postinst runs (as the agent's user) after an apt upgrade."""
    release(layout, "0.3.0", tmp_path / "log")
    layout.switch("0.3.0", Pending("0.3.0", int(time.time()) + 60))
    env = dict(os.environ) | {"JETFLEET_RELEASES_DIR": str(layout.root)}
    run = [str(LAUNCHER), "--factory-installed"]
    subprocess.run([*run, "0.2.5"], env=env, check=True, capture_output=True)
    assert layout.current() == "0.3.0", "the fleet's newer release stays"
    subprocess.run([*run, "0.3.0"], env=env, check=True, capture_output=True)
    assert layout.current() is None
    assert layout.pending() is None
    assert not (layout.root / "previous").exists()
