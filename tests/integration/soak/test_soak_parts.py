"""The soak bench's own parts: the seeded schedule, the counting, the link proxy, the RSS trace."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

from bench.soak import faults as F
from bench.soak.logs import summarize
from bench.soak.measure import Window, count_telemetry, explain_failures
from bench.soak.parts import Request
from bench.soak.proxy import DROP, FORWARD, LinkProxy
from bench.soak.rss_trace import RssTrace


def test_the_same_seed_gives_the_same_schedule_with_every_fault_kind() -> None:
    a = F.plan(1800, 20, 3, seed=7)
    assert a == F.plan(1800, 20, 3, seed=7)
    assert a != F.plan(1800, 20, 3, seed=8)
    assert {s.kind for s in a if s.is_fault} == set(F.FAULT_KINDS)
    assert {"rollout", "rollback", "redeploy"} <= {s.kind for s in a}
    assert "not done: clock_step" in F.describe(a, 7)


def test_a_gap_in_a_boot_is_lost_and_a_logged_unspooled_sample_is_named() -> None:
    stored = ["d:b1:1", "d:b1:2", "d:b1:4", "d:b1:6", "d:b2:1", "d:b2:1"]
    got = count_telemetry(stored, pending=["d:b1:7"], unspooled=["d:b1:5"])
    assert (got.produced, got.stored, got.pending) == (8, 5, 1)
    assert (got.lost, got.lost_ids, got.unspooled, got.duplicated) == (
        2,
        ("d:b1:3", "d:b1:5"),
        1,
        1,
    )


def test_only_failures_inside_a_kill_window_of_that_agent_are_explained() -> None:
    requests = [Request(10.0, 0, False), Request(10.0, 1, False), Request(50.0, 0, False)]
    explained, unexplained = explain_failures(requests, [Window(0, 9.5, 12.0)])
    assert explained == [requests[0]]
    assert unexplained == requests[1:]


def test_the_proxy_relays_and_a_drop_cuts_the_link_until_forwarding_resumes() -> None:
    with socket.create_server(("127.0.0.1", 0)) as upstream:
        proxy = LinkProxy(upstream.getsockname()).start()
        try:
            client = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
            server, _ = upstream.accept()
            client.sendall(b"ping")
            assert server.recv(4) == b"ping"
            proxy.set_mode(DROP)
            client.settimeout(5)
            assert client.recv(4) == b""  # the agent sees its link closed
            client.close()
            server.close()
            proxy.set_mode(FORWARD)
            again = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
            server, _ = upstream.accept()
            again.sendall(b"back")
            assert server.recv(4) == b"back"
            again.close()
            server.close()
        finally:
            proxy.stop()


def test_outages_keep_the_issues_lengths_and_overlap_only_faults_elsewhere() -> None:
    steps = F.plan(1800, 20, 3, seed=1)
    faults = [s for s in steps if s.is_fault]
    lengths = {s.kind: s.duration_s for s in faults}
    assert (lengths[F.BROKER_DOWN], lengths[F.PARTITION], lengths[F.DISK_FULL]) == (60, 120, 60)
    assert F.overlaps(steps), "a long outage runs on while the next fault starts"
    for i, a in enumerate(faults):
        for b in faults[i + 1 :]:
            if set(F.resources(a)) & set(F.resources(b)):
                assert b.at_s >= a.at_s + F.held_s(a.kind, 1.0) + F.SETTLE_S, (a, b)
    short = F.plan(180, 8, 2, seed=18, outage_scale=0.2)
    assert {s.duration_s for s in short if s.kind == F.PARTITION} <= {24.0}
    assert "not done: postgresql_restart" not in F.describe(steps, 1)
    given = F.describe(steps, 1, {**F.NOT_DONE, F.POSTGRESQL_RESTART: F.NOT_DONE_GIVEN_DB})
    assert "not done: postgresql_restart" in given


def test_a_faults_log_summary_counts_warnings_and_errors_folding_numbers() -> None:
    text = (
        "2026-12-02 07:25:28,101 INFO controller.server: fine\n"
        "2026-12-02 07:25:29,001 ERROR controller.rollouts.loop: database error: port 5 refused\n"
        "2026-12-02 07:25:30,001 ERROR controller.rollouts.loop: database error: port 6 refused\n"
        "2026-12-02 07:25:31,001 WARNING controller.ingest.batch: the database is back\n"
    )
    assert summarize(text) == (
        "2 ERROR, 1 WARNING: 2x ERROR controller.rollouts.loop: database error: port N refused; "
        "1x WARNING controller.ingest.batch: the database is back"
    )
    assert summarize("2026-12-02 07:25:28,101 INFO a: b\n") == "no warnings or errors"


def test_the_rss_trace_tells_memory_that_keeps_growing_from_memory_that_settled() -> None:
    """Two real processes: one allocates 4 MiB every 0.1 s throughout, one allocates 60 MiB at
    once and then holds it; only the first has a second half that grows."""
    grow = "import time\nkeep=[]\nwhile True:\n keep.append(b'x'*(4<<20)); time.sleep(0.1)"
    settle = "import time\nkeep=b'x'*(60<<20)\ntime.sleep(60)"
    procs = {name: subprocess.Popen([sys.executable, "-c", code]) for name, code in
             (("grows", grow), ("settles", settle))}  # fmt: skip
    try:
        trace = RssTrace(lambda: {n: p.pid for n, p in procs.items()}, interval_s=0.1).start()
        time.sleep(2.5)
        trace.stop()
        grows = trace.trend("grows", procs["grows"].pid)
        settles = trace.trend("settles", procs["settles"].pid)
    finally:
        for p in procs.values():
            p.kill()
            p.wait(10)
    assert grows is not None
    assert settles is not None
    assert float(grows.rsplit("second half ", 1)[1].split(" %")[0]) > 20
    assert abs(float(settles.rsplit("second half ", 1)[1].split(" %")[0])) < 5
