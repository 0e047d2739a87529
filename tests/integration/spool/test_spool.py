"""The SQLite spool: order, idempotency, bounds with a persisted drop counter, crash safety."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.link.spool import Forwarder, Spool, SpoolEntry, SpoolError, ids_over_budget

REPO = Path(__file__).resolve().parents[3]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def spool(tmp_path: Path) -> Iterator[Spool]:
    with Spool(tmp_path / "spool.sqlite3") as s:
        yield s


def keys(entries: list[SpoolEntry]) -> list[str]:
    return [e.key for e in entries]


def test_entries_come_back_in_append_order_until_acked(spool: Spool) -> None:
    for i in range(5):
        assert spool.append("telemetry" if i % 2 else "events", f"p{i}".encode(), f"k{i}")
    first = spool.peek(3)
    assert keys(first) == ["k0", "k1", "k2"]
    assert [e.payload for e in first] == [b"p0", b"p1", b"p2"]
    assert [e.channel for e in first] == ["events", "telemetry", "events"]
    assert keys(spool.peek(3)) == ["k0", "k1", "k2"], "peek does not consume"
    assert spool.ack([first[0].id, first[1].id]) == 2
    assert keys(spool.peek(10)) == ["k2", "k3", "k4"]
    assert spool.stats().entries == 3


def test_a_key_already_waiting_is_not_stored_twice(spool: Spool) -> None:
    assert spool.append("telemetry", b"a", "same")
    assert not spool.append("telemetry", b"b", "same")
    assert [e.payload for e in spool.peek(10)] == [b"a"]


def test_oldest_entries_are_dropped_to_fit_the_byte_bound(tmp_path: Path) -> None:
    path = tmp_path / "spool.sqlite3"
    with Spool(path, max_bytes=1000) as spool:
        for i in range(10):
            spool.append("t", b"x" * 190, f"k{i}")
        waiting = keys(spool.peek(100))
        assert waiting == ["k5", "k6", "k7", "k8", "k9"]
        assert spool.stats().bytes <= 1000
        assert spool.dropped == 5
    with Spool(path, max_bytes=1000) as reopened:
        assert reopened.dropped == 5, "the drop counter survives a restart"
        assert reopened.stats().bytes == 5 * (190 + 1 + 2)


def test_entries_older_than_the_age_bound_are_dropped(tmp_path: Path) -> None:
    clock = FakeClock()
    with Spool(tmp_path / "s.sqlite3", max_age_s=60.0, clock=clock) as spool:
        spool.append("t", b"old", "old")
        clock.now += 30
        spool.append("t", b"mid", "mid")
        clock.now += 31
        spool.append("t", b"new", "new")
        assert keys(spool.peek(10)) == ["mid", "new"]
        assert spool.dropped == 1


def test_a_message_larger_than_the_spool_is_refused_with_the_fix(tmp_path: Path) -> None:
    with (
        Spool(tmp_path / "s.sqlite3", max_bytes=100) as spool,
        pytest.raises(ValueError, match="raise the spool's max_bytes"),
    ):
        spool.append("t", b"x" * 200, "big")


def test_an_unwritable_location_names_the_state_directory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(SpoolError, match="state directory"):
        Spool(blocker / "spool.sqlite3")


def test_ids_over_budget_drops_oldest_until_it_fits() -> None:
    assert ids_over_budget([(1, 10), (2, 10), (3, 10)], total_bytes=30, max_bytes=15) == (
        [1, 2],
        20,
    )
    assert ids_over_budget([(1, 10)], total_bytes=10, max_bytes=15) == ([], 0)


def start_writer(path: Path, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration.spool.spool_writer", str(path), mode],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def kill(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            stream.close()


def test_sigkill_after_ack_loses_nothing_and_repeats_nothing(tmp_path: Path) -> None:
    path = tmp_path / "spool.sqlite3"
    writer = start_writer(path, "append-ack")
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "ready"
    finally:
        kill(writer)
    assert writer.returncode == -signal.SIGKILL
    with Spool(path) as spool:
        assert keys(spool.peek(100)) == [f"k{i}" for i in range(20, 50)]


def test_sigkill_in_the_middle_of_appending_keeps_every_returned_append(tmp_path: Path) -> None:
    path = tmp_path / "spool.sqlite3"
    writer = start_writer(path, "stream")
    printed: list[str] = []
    try:
        assert writer.stdout is not None
        while len(printed) < 200:
            line = writer.stdout.readline()
            assert line, "the writer died before it was killed"
            printed.append(line.strip())
    finally:
        kill(writer)
    with Spool(path) as spool:
        stored = keys(spool.peek(1_000_000))
    assert stored[: len(printed)] == printed, "an append that returned was lost"
    assert stored == [f"s{i}" for i in range(len(stored))], "gaps or duplicates after the crash"


def test_forwarder_stops_at_the_first_failure_and_resumes_in_order(spool: Spool) -> None:
    for i in range(6):
        spool.append("t", b"x", f"k{i}")
    sent: list[str] = []
    refuse = {"k3"}

    def publish(entry: SpoolEntry) -> bool:
        if entry.key in refuse:
            return False
        sent.append(entry.key)
        return True

    forwarder = Forwarder(spool, publish, batch=2)
    result = forwarder.drain()
    assert (result.delivered, result.failed) == (3, True)
    assert keys(spool.peek(10)) == ["k3", "k4", "k5"]
    refuse.clear()
    result = forwarder.drain()
    assert (result.delivered, result.failed) == (3, False)
    assert sent == [f"k{i}" for i in range(6)]
    assert len(spool) == 0
