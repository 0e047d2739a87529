"""The psutil host collector on this machine."""

from __future__ import annotations

import socket
import time
from collections import namedtuple
from pathlib import Path

import psutil
import pytest

from agent.telemetry.collectors.host import (
    HostCollector,
    busy_percent,
    counter_delta,
    existing_ancestor,
)


def test_host_reading_matches_psutil(tmp_path: Path) -> None:
    collector = HostCollector(tmp_path, per_core=True)
    r = collector.collect()
    assert r.available
    assert r.memory_total_bytes == psutil.virtual_memory().total
    assert r.memory_available_bytes is not None
    assert r.memory_available_bytes > 0
    assert r.per_core_percent is not None
    assert len(r.per_core_percent) == psutil.cpu_count()
    assert r.disk_total_bytes == psutil.disk_usage(str(tmp_path)).total
    assert r.disk_free_bytes is not None
    assert 0 < r.disk_free_bytes <= r.disk_total_bytes


def test_network_deltas_cover_the_traffic_of_the_interval(tmp_path: Path) -> None:
    collector = HostCollector(tmp_path)
    collector.collect()
    payload = b"x" * 200_000
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname()) as client:
            peer, _ = server.accept()
            with peer:
                client.sendall(payload)
                received = 0
                while received < len(payload):
                    received += len(peer.recv(65536))
    r = collector.collect()
    assert r.net_sent_bytes is not None
    assert r.net_sent_bytes >= len(payload)
    assert r.net_recv_bytes is not None
    assert r.net_recv_bytes >= len(payload)
    assert r.interval_s is not None
    assert r.interval_s >= 0


def test_disk_of_a_state_dir_not_created_yet_is_its_parents(tmp_path: Path) -> None:
    r = HostCollector(tmp_path / "later" / "state").collect()
    assert r.disk_path == str(tmp_path)
    assert r.disk_free_bytes is not None
    assert existing_ancestor(tmp_path / "a" / "b") == tmp_path


def test_counter_delta_needs_a_baseline_and_survives_a_reset() -> None:
    assert counter_delta(None, 10) is None
    assert counter_delta(10, 25) == 15
    assert counter_delta(25, 3) is None


def test_cpu_use_follows_real_work_and_ignores_other_psutil_callers(tmp_path: Path) -> None:
    collector = HostCollector(tmp_path)
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:
        psutil.cpu_percent(interval=None)
    r = collector.collect()
    assert r.cpu_percent is not None
    assert r.cpu_percent >= 100.0 / (psutil.cpu_count() or 1) * 0.5


def test_busy_percent_counts_iowait_as_idle() -> None:
    fields = ("user", "system", "idle", "iowait")
    before = namedtuple("T", fields)(10.0, 0.0, 10.0, 0.0)
    after = namedtuple("T", fields)(13.0, 0.0, 15.0, 2.0)
    assert busy_percent(before, after) == pytest.approx(30.0)
