"""The sample guard (issue N9): timestamps against the receive time, a token bucket per device,
one log line per device and minute; and the ingest applying it (fakes, no broker, no database)."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from controller.db.telemetry_rows import RedatedTelemetry, sample_row, sample_values
from controller.db.telemetry_store import Retention
from controller.ingest.handlers import Ingest
from controller.ingest.sample_guard import (
    BURST,
    MAX_FUTURE_SKEW_S,
    RATE_PER_S,
    Buckets,
    GuardCounts,
    GuardLimits,
    Outcome,
    Tally,
    judge_time,
    rate_bound,
    redated,
)
from shared.codec import encode
from shared.messages import Event
from shared.telemetry import Telemetry
from shared.topics import Channel, Topics

NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=timezone.utc)
DAY = 86_400.0
KEEP = 30 * DAY


def sample(device_id: str, n: int, ts: datetime) -> Telemetry:
    return Telemetry(
        device_id=device_id,
        sample_id=f"{device_id}-{n}",
        ts=ts,
        interval_s=10.0,
        cpu_percent=12.5,
        memory_used_bytes=1_000,
        memory_total_bytes=8_000,
        power_mode="15W",
    )


# --- time ------------------------------------------------------------------------------------


def test_a_sample_within_the_skew_is_stored_as_dated_beyond_it_redated() -> None:
    skew = MAX_FUTURE_SKEW_S
    assert skew == 300.0
    within = NOW + timedelta(seconds=skew)
    beyond = NOW + timedelta(seconds=skew + 1)
    assert judge_time(within, NOW, keep_s=KEEP, skew_s=skew) is Outcome.STORE
    assert judge_time(NOW, NOW, keep_s=KEEP, skew_s=skew) is Outcome.STORE
    assert judge_time(beyond, NOW, keep_s=KEEP, skew_s=skew) is Outcome.REDATED
    attack = datetime(2099, 1, 1, tzinfo=timezone.utc)
    assert judge_time(attack, NOW, keep_s=KEEP, skew_s=skew) is Outcome.REDATED
    naive = datetime(2099, 1, 1)  # no offset: UTC, as the store reads it
    assert judge_time(naive, NOW, keep_s=KEEP, skew_s=skew) is Outcome.REDATED


def test_a_sample_older_than_the_longest_retention_is_stale() -> None:
    skew = MAX_FUTURE_SKEW_S
    edge = NOW - timedelta(seconds=KEEP)
    assert judge_time(edge, NOW, keep_s=KEEP, skew_s=skew) is Outcome.STORE
    two_days = NOW - timedelta(days=2)  # past raw retention, within the rollups': kept
    assert judge_time(two_days, NOW, keep_s=KEEP, skew_s=skew) is Outcome.STORE
    older = edge - timedelta(seconds=1)
    assert judge_time(older, NOW, keep_s=KEEP, skew_s=skew) is Outcome.STALE
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)  # an RTC that lost its time
    assert judge_time(epoch, NOW, keep_s=KEEP, skew_s=skew) is Outcome.STALE


def test_a_redated_sample_is_stored_at_the_receive_time_with_the_device_time_in_extra() -> None:
    attack = datetime(2099, 1, 1, tzinfo=timezone.utc)
    original = sample("gw-1", 1, attack)
    stored = redated(original, NOW)
    assert isinstance(stored, RedatedTelemetry)
    assert isinstance(stored, Telemetry)
    assert (stored.ts, stored.device_ts, stored.sample_id) == (NOW, attack, "gw-1-1")
    row = sample_row(stored)
    assert row["ts"] == NOW
    assert row["extra"] == {"power_mode": "15W", "device_ts": "2099-01-01T00:00:00+00:00"}
    as_text = sample_values(stored, json_text=True)
    assert json.loads(as_text[-1])["device_ts"] == "2099-01-01T00:00:00+00:00"
    assert "device_ts" not in encode(stored).decode()  # never on the wire
    assert "device_ts" not in (sample_row(original)["extra"] or {})


# --- rate ------------------------------------------------------------------------------------


def test_the_bucket_gives_the_burst_then_the_rate_and_devices_do_not_share_it() -> None:
    buckets = Buckets(rate_per_s=10.0, burst=100.0)
    now = 1000.0
    assert sum(buckets.take("gw-1", now) for _ in range(1000)) == 100
    assert not buckets.take("gw-1", now)
    assert buckets.take("gw-2", now), "another device has its own bucket"
    now += 2.0  # 20 tokens
    assert sum(buckets.take("gw-1", now) for _ in range(1000)) == 20
    now += 3600.0  # refills up to the burst, not beyond
    assert sum(buckets.take("gw-1", now) for _ in range(1000)) == 100


def test_a_steady_agent_is_never_refused() -> None:
    buckets = Buckets(rate_per_s=RATE_PER_S, burst=BURST)
    now = 0.0
    for _ in range(10_000):  # a sample a second: ten times the default agent's rate
        assert buckets.take("gw-steady", now)
        now += 1.0


def test_the_flood_of_the_probe_is_bounded() -> None:
    """34,200 samples in 10 s from one device: the burst and 10 s of the rate are stored."""
    buckets = Buckets(rate_per_s=RATE_PER_S, burst=BURST)
    taken = sum(buckets.take("gw-evil", i * 10.0 / 34_200) for i in range(34_200))
    assert taken <= BURST + 10 * RATE_PER_S + 1
    assert taken >= BURST


def test_buckets_are_bounded_in_number() -> None:
    buckets = Buckets(rate_per_s=1.0, burst=1.0, max_keys=3)
    for d in range(10):
        assert buckets.take(f"gw-{d}", 0.0)
    assert len(buckets._buckets) == 3


def test_workers_share_the_bound() -> None:
    whole = GuardLimits()
    for n in (1, 2, 3, 8):
        share = whole.per_worker(n)
        assert share.rate_per_s * n == pytest.approx(whole.rate_per_s)
        assert share.burst * n == pytest.approx(whole.burst)
        assert share.skew_s == whole.skew_s
        assert share.workers == n
    assert GuardLimits(burst=4).per_worker(16).burst == 1.0, "each worker can store a sample"
    assert GuardLimits().per_worker(0) == GuardLimits()
    assert rate_bound(GuardLimits().per_worker(2)) == (
        "over the rate bound of 10 samples/s (burst 1000): 5/s (burst 500) in each of 2 ingest "
        "workers"
    )


# --- counts and log lines --------------------------------------------------------------------


def test_one_log_line_per_device_and_minute_with_what_happened_since() -> None:
    tally = Tally(GuardLimits(), KEEP, window_s=60)
    attack = datetime(2099, 1, 1, tzinfo=timezone.utc)
    first = tally.note("gw-1", Outcome.REDATED, 1000.0, attack)
    assert first is not None
    assert first.startswith("telemetry from gw-1: 1 stored at the controller's receive time")
    assert "2099-01-01T00:00:00+00:00" in first
    for i in range(500):
        assert tally.note("gw-1", Outcome.OVER_RATE, 1000.0 + i / 10, None) is None
    assert tally.note("gw-1", Outcome.STALE, 1055.0, datetime(1970, 1, 1)) is None
    assert tally.note("gw-2", Outcome.OVER_RATE, 1055.0, None) is not None, "per device"
    line = tally.note("gw-1", Outcome.OVER_RATE, 1060.0, None)
    assert line is not None
    assert "501 refused over the rate bound of 10 samples/s (burst 1000)" in line
    assert "1 refused as older than the 30-day retention, the oldest 1970-01-01" in line
    assert "receive time" not in line
    assert tally.note("gw-1", Outcome.OVER_RATE, 1061.0, None) is None


def test_counts_add_up_and_subtract() -> None:
    a = GuardCounts(redated=1, stale=2, over_rate=3)
    assert a + a == GuardCounts(2, 4, 6)
    assert (a + a) - a == a
    assert GuardCounts() + a == a


# --- the ingest applies it -------------------------------------------------------------------


class FakeBatcher:
    """What Ingest needs of the batch writer: the retention, and a queue to look at."""

    def __init__(self) -> None:
        self.retention = Retention()
        self.on_written: Any = None
        self.submitted: list[Telemetry | Event] = []

    def submit(self, item: Telemetry | Event) -> None:
        self.submitted.append(item)

    def after_written(self, done: Any) -> None:
        done()


@pytest.fixture
def batcher() -> FakeBatcher:
    return FakeBatcher()


def ingest_with(batcher: FakeBatcher, clock: datetime = NOW, **kwargs: Any) -> Ingest:
    return Ingest(None, Topics("jf"), batcher, clock=lambda: clock, **kwargs)  # type: ignore[arg-type]


def publish(ingest: Ingest, message: Telemetry) -> None:
    ingest.handle(Topics("jf").device(message.device_id, Channel.TELEMETRY), encode(message))


def test_the_ingest_redates_the_future_refuses_the_stale_and_counts_both(
    batcher: FakeBatcher,
) -> None:
    ingest = ingest_with(batcher)
    publish(ingest, sample("gw-evil", 1, datetime(2099, 1, 1, tzinfo=timezone.utc)))
    publish(ingest, sample("gw-evil", 2, NOW - timedelta(days=31)))
    publish(ingest, sample("gw-evil", 3, NOW + timedelta(minutes=4)))
    publish(ingest, sample("gw-ok", 1, NOW - timedelta(seconds=5)))
    assert [m.sample_id for m in batcher.submitted] == ["gw-evil-1", "gw-evil-3", "gw-ok-1"]
    first = batcher.submitted[0]
    assert isinstance(first, RedatedTelemetry)
    assert first.ts == NOW
    assert first.device_ts == datetime(2099, 1, 1, tzinfo=timezone.utc)
    assert batcher.submitted[1].ts == NOW + timedelta(minutes=4), "within the skew: as dated"
    assert ingest.guard_stats() == GuardCounts(redated=1, stale=1)
    stats = ingest.stats()
    assert stats.rejected_by_channel == {"telemetry": 1}
    assert stats.last_rejection is not None
    assert stats.last_rejection.startswith(
        "rejected telemetry from gw-evil: ts: 2026-10-31T12:00:00+00:00 is older than the "
        "30-day retention"
    )


def test_the_ingest_bounds_a_flood_per_device_and_logs_once(
    batcher: FakeBatcher, caplog: pytest.LogCaptureFixture
) -> None:
    ingest = ingest_with(batcher, guard=GuardLimits(rate_per_s=1.0, burst=50.0))
    caplog.set_level(logging.WARNING, logger="controller.ingest.handlers")
    for n in range(2_000):
        publish(ingest, sample("gw-evil", n, NOW))
        if n % 100 == 0:
            publish(ingest, sample("gw-ok", n, NOW))
    evil = [m for m in batcher.submitted if m.device_id == "gw-evil"]
    assert 50 <= len(evil) <= 55, len(evil)
    assert len([m for m in batcher.submitted if m.device_id == "gw-ok"]) == 20
    refused = 2_000 - len(evil)
    assert ingest.guard_stats() == GuardCounts(over_rate=refused)
    assert ingest.stats().rejected_by_channel == {"telemetry": refused}
    assert ingest.stats().last_rejection == (
        "rejected telemetry from gw-evil: <rate>: over the rate bound of 1 samples/s (burst 50)"
    )
    lines = [r.getMessage() for r in caplog.records if "telemetry from gw-evil" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "1 refused over the rate bound" in lines[0]


def test_the_bound_is_the_whole_one_without_workers_and_worker_counts_are_absorbed(
    batcher: FakeBatcher,
) -> None:
    ingest = ingest_with(batcher)
    assert ingest.guard_limits == GuardLimits()
    ingest.absorb(0, {}, None, GuardCounts(redated=2, over_rate=5))
    ingest.absorb(0, {}, None, GuardCounts(stale=1))
    assert ingest.guard_stats() == GuardCounts(redated=2, stale=1, over_rate=5)


def test_a_worker_reports_its_guard_counts_as_deltas() -> None:
    from controller.ingest.batch import IngestBatcher
    from controller.ingest.worker import WorkerConfig, WorkerReport, _Reporter

    batcher = IngestBatcher(None)  # type: ignore[arg-type]  # never started: only its counters
    ingest = Ingest(None, Topics("jf"), batcher, clock=lambda: NOW)  # type: ignore[arg-type]
    reporter = _Reporter(ingest, batcher)
    assert not reporter.next().moved
    publish(ingest, sample("gw-evil", 1, datetime(2099, 1, 1, tzinfo=timezone.utc)))
    report = reporter.next()
    assert report.guard == GuardCounts(redated=1)
    assert report.moved
    assert reporter.next().guard == GuardCounts()
    assert WorkerReport().guard == GuardCounts()
    config = WorkerConfig(0, "sqlite://", "mqtt://x", None, "jf", 1, Retention())  # type: ignore[arg-type]
    assert config.guard == GuardLimits()
