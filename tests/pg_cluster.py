"""A throwaway PostgreSQL cluster that a test or bench owns: made with ``initdb``, started with
``pg_ctl`` on a free port on 127.0.0.1 (its unix socket in its own directory), restarted or
stopped on purpose, and removed at the end. Never the shared server on :5432.

``initdb`` and the server refuse to run as root: as root the cluster's files belong to the
``postgres`` user (Debian's package creates it) and every command runs through ``runuser``;
otherwise they run as the current user. The cluster lives under the directory it is given when
that user can reach it, else in a fresh directory under the system's temporary directory
(pytest's ``tmp_path`` under ``/tmp/pytest-of-root`` is closed to other users).

Binaries: ``pg_ctl`` on PATH, else the newest ``/usr/lib/postgresql/*/bin`` (Debian keeps them
off PATH), else ``pg_config --bindir``; missing ones stop with the package to install.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.ports import free_port

SERVER_USER = "postgres"


class ClusterError(RuntimeError):
    """The cluster could not be made, started or stopped; the message says why."""


def pg_bindir() -> Path:
    """The directory holding ``initdb`` and ``pg_ctl``; ClusterError naming the package if none."""
    found = shutil.which("pg_ctl")
    if found and Path(found).with_name("initdb").exists():
        return Path(found).resolve().parent
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0,
    )
    if versions:
        return Path(versions[-1]).parent
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=True)
        bindir = Path(out.stdout.strip())
        if (bindir / "pg_ctl").exists():
            return bindir
    raise ClusterError(
        "no PostgreSQL server binaries (initdb, pg_ctl): install them (apt-get install postgresql)"
    )


def _reachable_by(path: Path, uid: int, gids: set[int]) -> bool:
    """Whether ``uid`` may traverse every directory down to ``path`` (which must exist)."""
    for part in [path, *path.parents]:
        st = part.stat()
        if st.st_uid == uid:
            bit = 0o100
        elif st.st_gid in gids:
            bit = 0o010
        else:
            bit = 0o001
        if not st.st_mode & bit:
            return False
    return True


class Cluster:
    """``start()`` makes (once) and starts the cluster; ``url`` is a SQLAlchemy URL of
    ``database``; ``restart``/``stop``/``start`` as faults; ``remove()`` stops it and deletes
    its files (call it in a ``finally``)."""

    def __init__(self, under: Path, database: str = "jetfleet", port: int | None = None) -> None:
        self.database = database
        self.port = port or free_port()
        self.bindir = pg_bindir()
        self._as_root = os.geteuid() == 0
        self._user: pwd.struct_passwd | None = None
        if self._as_root:
            try:
                self._user = pwd.getpwnam(SERVER_USER)
            except KeyError:
                raise ClusterError(
                    f"running as root, the PostgreSQL cluster needs a {SERVER_USER!r} user to "
                    "run as (apt-get install postgresql creates it)"
                ) from None
        under.mkdir(parents=True, exist_ok=True)
        self.root = self._place(under)
        self.data = self.root / "data"
        self.sockets = self.root / "sockets"
        self.log = self.root / "postgresql.log"
        self.made = False
        self.starts = 0

    def _place(self, under: Path) -> Path:
        user = self._user
        if user is None:
            root = under / "postgresql"
            root.mkdir(exist_ok=True)
            return root
        gids = {user.pw_gid} | set(os.getgrouplist(user.pw_name, user.pw_gid))
        parent = under if _reachable_by(under.resolve(), user.pw_uid, gids) else None
        root = Path(tempfile.mkdtemp(prefix="jetfleet-pg-", dir=parent))
        os.chown(root, user.pw_uid, user.pw_gid)
        root.chmod(0o700)
        return root

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{self.database}"

    @property
    def admin_dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bindir / argv[0]), *argv[1:]]
        if self._user is not None:
            cmd = ["runuser", "-u", self._user.pw_name, "--", *cmd]
        return subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, check=False, cwd=self.root
        )

    def _check(self, what: str, done: subprocess.CompletedProcess[str]) -> None:
        if done.returncode != 0:
            raise ClusterError(
                f"{what} failed ({done.returncode}): {(done.stderr or done.stdout).strip()}\n"
                f"server log {self.log}:\n{self.log_tail()}"
            )

    def version(self) -> str:
        """``PostgreSQL 15.x`` as ``pg_ctl --version`` says it."""
        done = subprocess.run(
            [str(self.bindir / "pg_ctl"), "--version"], capture_output=True, text=True, check=False
        )
        return done.stdout.strip().removeprefix("pg_ctl (").replace(")", "", 1) or "PostgreSQL"

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def make(self) -> None:
        """initdb, the settings (port, loopback only, socket directory), the database."""
        done = self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
            "--locale=C", "--no-sync",
        )  # fmt: skip
        self._check("initdb", done)
        self.sockets.mkdir()
        if self._user is not None:
            os.chown(self.sockets, self._user.pw_uid, self._user.pw_gid)
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"\n# {__name__}\nport = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.sockets}'\nshared_buffers = 32MB\n"
                "max_connections = 100\n"
            )
        self.made = True

    def start(self) -> str:
        """Start the server (made first if needed), create the database once; its URL."""
        first = not self.made
        if first:
            self.make()
        self._check(
            "pg_ctl start",
            self._run(
                "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start"
            ),
        )
        self.starts += 1
        if first:
            import psycopg

            with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{self.database}"')
        return self.url

    def stop(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m fast``: sessions are cut, the server shuts down cleanly."""
        self._check(
            "pg_ctl stop",
            self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop"),
        )

    def restart(self, gap_s: float = 0.0) -> None:
        """Stop (fast), stay down ``gap_s`` seconds, start again."""
        self.stop()
        if gap_s > 0:
            time.sleep(gap_s)
        self.start()

    @property
    def pid(self) -> int | None:
        """The postmaster's pid while it runs."""
        try:
            first = (self.data / "postmaster.pid").read_text().splitlines()[0]
        except (OSError, IndexError):
            return None
        return int(first) if first.strip().isdigit() else None

    def remove(self, keep_log: Path | None = None) -> None:
        """Stop the server if it runs (immediate) and delete the cluster; the server log is
        copied to ``keep_log`` first when given."""
        if self.pid is not None:
            done = self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
            if done.returncode != 0 and self.pid is not None:
                with contextlib.suppress(OSError):
                    os.kill(self.pid, 9)
        if keep_log is not None and self.log.exists():
            keep_log.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError):
                shutil.copyfile(self.log, keep_log)
        shutil.rmtree(self.root, ignore_errors=True)
