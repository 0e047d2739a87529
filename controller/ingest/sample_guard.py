"""What the controller stores of a device's telemetry: its timestamps and its rate (issue N9).

A gateway's clock and its publishing rate are its own word. Before this guard a gateway that
published 34,200 samples in 10 s dated 2099 had every one stored, and retention, which deletes by
the sample's ``ts``, never removed them. The rules, decided here without I/O; the ingest
(:class:`controller.ingest.handlers.Ingest`) applies them to every telemetry message, counts and
logs:

**Time**, against the controller's receive time:

- dated more than :data:`MAX_FUTURE_SKEW_S` (5 minutes) ahead: stored at the receive time
  (:attr:`Outcome.REDATED`), with the device's own time kept in the row's ``extra`` under
  ``device_ts`` (:class:`controller.db.telemetry_rows.RedatedTelemetry`). Not dropped: the
  readings themselves are real, a gateway with a broken clock stays visible in fleet health, and
  retention removes the row on time. A sample within the skew is stored as dated (retention
  removes it at most that much late).
- dated before the longest retention (``max(raw_s, rollup_s)`` of
  :class:`controller.db.telemetry_store.Retention`, 30 days by default): refused
  (:attr:`Outcome.STALE`); upkeep would delete the row and its minute rollup at once. It is not
  re-dated: old readings stamped "now" would pass for the device's current health. A sample
  older than the raw retention but within the rollup retention is kept, as before: an agent's
  spool replayed after a multi-day outage feeds the minute rollups before upkeep prunes the raw
  rows.

**Rate**: a token bucket per device, :data:`RATE_PER_S` (10) samples a second sustained and
:data:`BURST` (1,000) at once. An agent samples every 10 s by default
(``agent.settings.AgentSettings.telemetry_interval_s``): a hundredfold margin, and the burst
holds about 2.8 hours of one agent's samples arriving together (the backlog the broker queued for
a restarted controller, an agent's spool after a short outage). A sample over the bound is
refused (:attr:`Outcome.OVER_RATE`) before it is decoded, so a flood costs no validation; the
bucket is checked first, so a sample refused or re-dated for its time still spends a token.
Known cost: an agent replaying a longer backlog faster than the rate loses the excess (counted
and logged like every refusal).

**Ingest workers** (``--ingest-workers N``): the broker spreads one device's telemetry over the
N workers of the shared subscription (no routing by device), so each worker keeps its own buckets
with the bound divided by N (:meth:`GuardLimits.per_worker`): whatever the spread, the workers
together store at most :data:`RATE_PER_S` a second and :data:`BURST` at once per device; a
device the broker sends mostly to one worker is held to 1/N of the bound (still ten times a
default agent's rate at N = 10). Replicas (``--replica-id``) each apply the whole bound.

**Counting**: a refused sample is a rejected telemetry message (``GET /api/v1/ingest``
``rejected_by_channel["telemetry"]`` and ``last_rejection``, ``/metrics``
``jetfleet_ingest_rejected_total{channel="telemetry"}``); a re-dated one is stored and counts as
accepted. All three outcomes are counted by kind (:class:`GuardCounts`, ``Ingest.guard_stats``,
added up over the workers' reports), and each device gets at most one log line every
:data:`LOG_EVERY_S` (a minute) with what happened since its previous line (:class:`Tally`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from controller.db.telemetry_rows import RedatedTelemetry, aware
from shared.messages import Event
from shared.telemetry import Telemetry

MAX_FUTURE_SKEW_S = 300.0
"""How far ahead of the controller's clock a sample may be dated and still be stored as dated."""
RATE_PER_S = 10.0
"""Samples a second one device may have stored, sustained (all ingest workers together)."""
BURST = 1_000.0
"""Samples one device may have stored at once, after a quiet spell (all workers together)."""
LOG_EVERY_S = 60.0
"""At most one log line per device this often about what the guard did to its samples."""
MAX_DEVICES = 100_000
"""Devices whose bucket and log state are kept; beyond, the least recently seen is forgotten."""


class Outcome(enum.Enum):
    """What the guard decided for one sample (``STORE``: as it came)."""

    STORE = "store"
    REDATED = "redated"
    STALE = "stale"
    OVER_RATE = "over_rate"


@dataclass(frozen=True)
class GuardLimits:
    """The bounds one process applies (see the module)."""

    skew_s: float = MAX_FUTURE_SKEW_S
    rate_per_s: float = RATE_PER_S
    burst: float = BURST
    workers: int = 1
    """How many processes share the bound, each with these (divided) limits."""

    def per_worker(self, workers: int) -> GuardLimits:
        """The share of each of ``workers`` processes that split one device's telemetry."""
        n = max(1, workers)
        return GuardLimits(self.skew_s, self.rate_per_s / n, max(1.0, self.burst / n), n)


@dataclass(frozen=True)
class GuardCounts:
    """Samples re-dated, refused as too old, refused over the rate (since start, or a delta)."""

    redated: int = 0
    stale: int = 0
    over_rate: int = 0

    def __add__(self, other: GuardCounts) -> GuardCounts:
        return GuardCounts(
            self.redated + other.redated,
            self.stale + other.stale,
            self.over_rate + other.over_rate,
        )

    def __sub__(self, other: GuardCounts) -> GuardCounts:
        return GuardCounts(
            self.redated - other.redated,
            self.stale - other.stale,
            self.over_rate - other.over_rate,
        )


def judge_time(ts: datetime, received: datetime, *, keep_s: float, skew_s: float) -> Outcome:
    """``STORE``, ``REDATED`` (too far ahead of ``received``) or ``STALE`` (older than ``keep_s``).

    A ``ts`` without an offset is UTC, as the store reads it."""
    when = aware(ts)
    if when > received + timedelta(seconds=skew_s):
        return Outcome.REDATED
    if when < received - timedelta(seconds=keep_s):
        return Outcome.STALE
    return Outcome.STORE


def redated(message: Telemetry, received: datetime) -> RedatedTelemetry:
    """``message`` dated ``received``, its own time kept as ``device_ts``."""
    return RedatedTelemetry.model_validate(
        {**message.__dict__, "ts": received, "device_ts": aware(message.ts)}
    )


def redated_event(message: Event, received: datetime) -> Event:
    """``message`` dated ``received``, its own time kept in ``data["device_ts"]``. Events pass
    the same rules as samples (and spend the same bucket); they are pruned with the rollups."""
    data = {**message.data, "device_ts": aware(message.ts).isoformat()}
    return message.model_copy(update={"ts": received, "data": data})


class _Bucket:
    __slots__ = ("at", "tokens")

    def __init__(self, tokens: float, at: float) -> None:
        self.tokens = tokens
        self.at = at


class Buckets:
    """A token bucket per key: ``rate_per_s`` tokens a second up to ``burst``; not thread-safe.

    A key not seen before starts full. Keys are bounded: the least recently used is forgotten
    first (it comes back full, as it would after ``burst / rate_per_s`` seconds of quiet)."""

    def __init__(self, rate_per_s: float, burst: float, max_keys: int = MAX_DEVICES) -> None:
        self._rate = rate_per_s
        self._burst = burst
        self._max_keys = max_keys
        self._buckets: dict[str, _Bucket] = {}

    def take(self, key: str, now: float) -> bool:
        """Spend one token of ``key`` at monotonic time ``now``; False when there is none."""
        bucket = self._buckets.pop(key, None)
        if bucket is None:
            while len(self._buckets) >= self._max_keys:
                del self._buckets[next(iter(self._buckets))]
            bucket = _Bucket(self._burst, now)
        elif now > bucket.at:
            bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.at) * self._rate)
            bucket.at = now
        self._buckets[key] = bucket  # most recently used last
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True


@dataclass
class _Pending:
    """What happened to one device's samples since its last log line."""

    logged_at: float
    counts: dict[Outcome, int] = field(default_factory=dict)
    newest: datetime | None = None
    """The latest device time among re-dated samples."""
    oldest: datetime | None = None
    """The earliest device time among samples refused as too old."""


class Tally:
    """At most one log line per device every ``window_s``, with what happened since the last.

    The first outcome of a device is reported at once; later ones wait for the window and are
    reported together with the device's next re-dated or refused sample after it (nothing more
    to report: no line). Not thread-safe."""

    def __init__(
        self,
        limits: GuardLimits,
        keep_s: float,
        window_s: float = LOG_EVERY_S,
        max_keys: int = MAX_DEVICES,
    ) -> None:
        self._limits = limits
        self._keep_s = keep_s
        self._window = window_s
        self._max_keys = max_keys
        self._devices: dict[str, _Pending] = {}

    def note(self, device_id: str, outcome: Outcome, now: float, ts: datetime | None) -> str | None:
        """Count ``outcome`` (the sample's device time ``ts`` if decoded); the line to log now,
        if one is due."""
        pending = self._devices.get(device_id)
        if pending is None:
            while len(self._devices) >= self._max_keys:
                del self._devices[next(iter(self._devices))]
            pending = self._devices[device_id] = _Pending(logged_at=now - self._window)
        pending.counts[outcome] = pending.counts.get(outcome, 0) + 1
        if ts is not None and outcome is Outcome.REDATED:
            pending.newest = ts if pending.newest is None else max(pending.newest, ts)
        if ts is not None and outcome is Outcome.STALE:
            pending.oldest = ts if pending.oldest is None else min(pending.oldest, ts)
        if now - pending.logged_at < self._window:
            return None
        line = self._line(device_id, pending)
        self._devices[device_id] = _Pending(logged_at=now)
        return line

    def _line(self, device_id: str, pending: _Pending) -> str:
        limits, parts = self._limits, []
        redated_n = pending.counts.get(Outcome.REDATED, 0)
        stale_n = pending.counts.get(Outcome.STALE, 0)
        over_n = pending.counts.get(Outcome.OVER_RATE, 0)
        if redated_n:
            newest = f", dated up to {pending.newest.isoformat()}" if pending.newest else ""
            parts.append(
                f"{redated_n} stored at the controller's receive time{newest} (more than "
                f"{limits.skew_s:g} s ahead of its clock: check the device's clock)"
            )
        if stale_n:
            oldest = f", the oldest {pending.oldest.isoformat()}" if pending.oldest else ""
            parts.append(
                f"{stale_n} refused as older than the {self._keep_s / 86400:g}-day retention"
                f"{oldest}"
            )
        if over_n:
            parts.append(f"{over_n} refused {rate_bound(limits)}")
        return (
            f"telemetry from {device_id}: {'; '.join(parts)} "
            f"(at most one such line every {self._window:g} s per device)"
        )


def rate_bound(limits: GuardLimits) -> str:
    """The rate bound in words, for log lines and rejections."""
    n = limits.workers
    if n <= 1:
        return f"over the rate bound of {limits.rate_per_s:g} samples/s (burst {limits.burst:g})"
    return (
        f"over the rate bound of {limits.rate_per_s * n:g} samples/s (burst "
        f"{limits.burst * n:g}): {limits.rate_per_s:g}/s (burst {limits.burst:g}) in each of "
        f"{n} ingest workers"
    )


def refusal(outcome: Outcome, limits: GuardLimits, keep_s: float, ts: datetime | None) -> str:
    """Why a sample was refused, as ``<field>: <reason>`` of a rejection line."""
    if outcome is Outcome.OVER_RATE:
        return f"<rate>: {rate_bound(limits)}"
    dated = f"{ts.isoformat()} is " if ts is not None else ""
    return f"ts: {dated}older than the {keep_s / 86400:g}-day retention"


class SampleGuard:
    """The rules of the module for one process, and their counts; not thread-safe (the ingest
    calls it under its lock). ``now`` arguments are monotonic seconds."""

    def __init__(
        self,
        limits: GuardLimits,
        keep_s: float,
        *,
        log_every_s: float = LOG_EVERY_S,
        max_devices: int = MAX_DEVICES,
    ) -> None:
        self.limits = limits
        self.keep_s = keep_s
        self._buckets = Buckets(limits.rate_per_s, limits.burst, max_devices)
        self._tally = Tally(limits, keep_s, log_every_s, max_devices)
        self._counts = GuardCounts()

    def take(self, device_id: str, now: float) -> bool:
        """Whether one more sample of ``device_id`` is within its rate (refusals counted)."""
        if self._buckets.take(device_id, now):
            return True
        self._counts += GuardCounts(over_rate=1)
        return False

    def judge(self, ts: datetime, received: datetime) -> Outcome:
        """:func:`judge_time` under these limits (re-dated and stale samples counted)."""
        outcome = judge_time(ts, received, keep_s=self.keep_s, skew_s=self.limits.skew_s)
        if outcome is Outcome.REDATED:
            self._counts += GuardCounts(redated=1)
        elif outcome is Outcome.STALE:
            self._counts += GuardCounts(stale=1)
        return outcome

    def note(self, device_id: str, outcome: Outcome, now: float, ts: datetime | None) -> str | None:
        """The log line due for ``device_id`` after ``outcome``, if any (see :class:`Tally`)."""
        return self._tally.note(device_id, outcome, now, ts)

    def absorb(self, counts: GuardCounts) -> None:
        """Add what an ingest worker process's guard counted (a delta)."""
        self._counts += counts

    def counts(self) -> GuardCounts:
        return self._counts
