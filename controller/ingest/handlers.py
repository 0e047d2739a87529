"""Inbound MQTT messages → database. A bad payload is logged once, counted, and dropped.

Reported state and presence are stored as they arrive; telemetry and events go through the
batched writer (:class:`controller.ingest.batch.IngestBatcher`) and count as accepted once written.
While the database cannot be reached (PostgreSQL restarting;
:func:`controller.db.session.unavailable`) a reported state or presence is stored again with
back-off (:class:`controller.ingest.outage.Outage`) for up to ``outage_limit_s``, holding its
inbox lane (order is kept; the inbox bounds what waits behind it): the broker already had it
acknowledged, and an agent reports again only when something changes, so a dropped report
would leave the device's stored state stale.

A payload over ``max_payload_bytes`` is dropped before it is decoded; it counts as rejected on its
channel and is logged at most once per device and window (:class:`LogThrottle`), so one device
sending huge messages can neither exhaust memory in the decoder nor flood the log.

Telemetry and events pass the sample guard (:mod:`controller.ingest.sample_guard`):
one per-device rate bound checked before decoding, then the timestamp against the receive
time (re-dated when too far ahead, refused when older than retention; events are pruned with the
rollups). Refusals count as rejected on their channel; what the guard did is counted by kind
(:meth:`Ingest.guard_stats`) and logged at most once a minute per device.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime

from pydantic import BaseModel, ValidationError

from controller.db.repository import Repository
from controller.db.schema import utcnow
from controller.db.session import unavailable
from controller.errors import ControllerError
from controller.ingest.batch import IngestBatcher
from controller.ingest.log_throttle import LogThrottle
from controller.ingest.outage import OUTAGE_LIMIT_S, Outage
from controller.ingest.sample_guard import (
    GuardCounts,
    GuardLimits,
    Outcome,
    SampleGuard,
    redated_event,
)
from controller.ingest.sample_guard import redated as redated_sample
from controller.ingest.sample_guard import refusal as guard_refusal
from controller.records import IngestCounts
from controller.settings import DEFAULT_MAX_MQTT_PAYLOAD_BYTES
from shared.codec import MESSAGE_TYPES, MessageError, decode_for
from shared.messages import Event, ReportedState, Status
from shared.telemetry import Telemetry
from shared.topics import Channel, Topics

logger = logging.getLogger(__name__)
_GUARDED = (Channel.TELEMETRY, Channel.EVENTS)  # under the sample guard's rules

_MAX_CACHED_TOPICS = 100_000


class Ingest:
    """Handles every message the controller receives from agents."""

    def __init__(
        self,
        repo: Repository,
        topics: Topics,
        batcher: IngestBatcher,
        clock: Callable[[], datetime] = utcnow,
        max_payload_bytes: int = DEFAULT_MAX_MQTT_PAYLOAD_BYTES,
        log_throttle: LogThrottle | None = None,
        revoked: Callable[[Collection[str]], set[str]] | None = None,
        outage_limit_s: float = OUTAGE_LIMIT_S,
        guard: GuardLimits | None = None,
    ) -> None:
        self._repo = repo
        self._outage_limit = outage_limit_s
        self._revoked = revoked
        """The revoked devices among some: their presence stays offline (a retained "online"
        status left on the broker would otherwise bring one back after a controller restart).
        Asked once per batch: a replica that starts receives every device's retained status at
        once, and one query each held its inbox, and the reports behind them, for tens of
        seconds at 10,000 gateways (a restarted replica taking the rollout lease validated a
        wave 30-45 s after its last report in bench/scale.py)."""
        self._max_payload = max_payload_bytes
        self._throttle = log_throttle or LogThrottle()
        self._batcher = batcher
        """Telemetry and events are queued for batched writes."""
        batcher.on_written = self._count_written
        self._topics = topics
        self._parsed: dict[str, tuple[str, Channel] | None] = {}
        """Topic → (device, channel): a fleet has a bounded set of topics, parsed once each."""
        self._clock = clock
        self._lock = threading.Lock()
        self._accepted = 0
        self._rejected: Counter[str] = Counter()
        self._last_rejection: str | None = None
        retention = batcher.retention
        self._guard = SampleGuard(guard or GuardLimits(), max(retention.raw_s, retention.rollup_s))
        """Telemetry timestamps and per-device rate (issue N9); used under ``_lock``."""

    @property
    def guard_limits(self) -> GuardLimits:
        """The sample guard's bounds in this process (a worker's share in an ingest worker)."""
        return self._guard.limits

    def admit(self, topic: str, payload: bytes) -> bool:
        """False (counted, logged rate-limited) for a payload too large to decode."""
        if len(payload) <= self._max_payload:
            return True
        parsed = self._topics.parse(topic)
        if parsed is None or parsed[1] is Channel.DESIRED:
            return False
        device_id, channel = parsed
        line = (
            f"rejected {channel.value} from {device_id}: <payload>: {len(payload)} bytes, "
            f"over the {self._max_payload}-byte limit"
        )
        with self._lock:
            self._rejected[channel.value] += 1
            self._last_rejection = line
            held_back = self._throttle.admit((device_id, "too large"))
        if held_back is not None:
            more = f" ({held_back} more since the last such line)" if held_back else ""
            logger.warning("%s%s", line, more)
        return False

    def handle(self, topic: str, payload: bytes) -> None:
        """Decode, validate and store one message; never raises for a bad payload."""
        decoded = self._decoded(topic, payload)
        if decoded is None:
            return
        self._store_one(*decoded)

    def handle_many(self, messages: Sequence[tuple[str, bytes]]) -> None:
        """:meth:`handle` each (topic, payload) in order, the reported states and presence among
        them stored in one transaction (:meth:`ReportStore.record_many`): an inbox lane's
        backlog at once. A batch the database refuses for another reason than an outage is
        stored again one message at a time, so a message that cannot be stored costs only
        itself."""
        stores: list[tuple[ReportedState | Status, Channel, str]] = []
        for topic, payload in messages:
            try:
                decoded = self._decoded(topic, payload)
            except Exception:
                logger.exception("ingest of %s failed; the message was dropped", topic)
                continue
            if decoded is not None:
                stores.append(decoded)
        if not stores:
            return
        if len(stores) > 1:
            reports = [m for m, _c, _d in stores]

            def store_all() -> None:  # the revocation lookup too waits out an outage
                revoked = self._revoked_among(reports)
                batch = [self._prepared(m, revoked) for m in reports]
                self._repo.record_many(batch, self._clock())

            try:
                self._through_outage(store_all, f"{len(reports)} reports")
            except ControllerError as exc:
                logger.warning(
                    "could not store %d reports at once (%s): one by one", len(reports), exc
                )
            else:
                with self._lock:
                    self._accepted += len(reports)
                return
        for message, channel, device_id in stores:
            self._store_one(message, channel, device_id)

    def _store_one(self, message: ReportedState | Status, channel: Channel, device_id: str) -> None:
        try:
            self._through_outage(lambda: self._store(message), f"{channel.value} from {device_id}")
        except ControllerError as exc:
            logger.error("could not store %s from %s: %s", channel.value, device_id, exc)
            return
        with self._lock:
            self._accepted += 1

    def _decoded(
        self, topic: str, payload: bytes
    ) -> tuple[ReportedState | Status, Channel, str] | None:
        """The reported state or presence in one message, to store; None for a message refused
        (counted), one the controller ignores, or telemetry and events (queued for the batch
        writer, counted once written)."""
        if not self.admit(topic, payload):
            return None
        parsed = self._parse(topic)
        if parsed is None or parsed[1] is Channel.DESIRED:
            return None
        device_id, channel = parsed
        if channel in _GUARDED and not self._within_rate(device_id, channel):
            return None
        try:
            message = _decode(channel, payload)
            claimed = getattr(message, "device_id", device_id)
            if claimed != device_id:
                raise MessageError("device_id", f"is {claimed!r} but the topic names {device_id!r}")
        except MessageError as exc:
            self._reject(channel, device_id, exc)
            return None
        if isinstance(message, Telemetry):
            sample = self._dated(message)
            if sample is not None:
                self._batcher.submit(sample)  # counted as accepted once written
            return None
        if isinstance(message, Event):
            event = self._dated_event(message)
            if event is not None:
                self._batcher.submit(event)  # counted as accepted once written
            return None
        if not isinstance(message, (ReportedState, Status)):
            return None
        return message, channel, device_id

    def _within_rate(self, device_id: str, channel: Channel) -> bool:
        """Whether one more sample or event (one bucket) of ``device_id`` is within its rate."""
        with self._lock:
            if self._guard.take(device_id, time.monotonic()):
                return True
        self._guarded(device_id, Outcome.OVER_RATE, None, channel)
        return False

    def _dated_event(self, message: Event) -> Event | None:
        """An event under the samples' time rules: re-dated to now (its own time kept in
        ``data["device_ts"]``) when dated too far ahead, refused when older than retention
        (events are pruned with the rollups)."""
        received = self._clock()
        with self._lock:
            outcome = self._guard.judge(message.ts, received)
        if outcome is Outcome.STORE:
            return message
        self._guarded(message.device_id, outcome, message.ts, Channel.EVENTS)
        return redated_event(message, received) if outcome is Outcome.REDATED else None

    def _dated(self, message: Telemetry) -> Telemetry | None:
        """``message`` as stored: re-dated to now when dated too far ahead, None (refused) when
        older than retention."""
        received = self._clock()
        with self._lock:
            outcome = self._guard.judge(message.ts, received)
        if outcome is Outcome.STORE:
            return message
        self._guarded(message.device_id, outcome, message.ts)
        return redated_sample(message, received) if outcome is Outcome.REDATED else None

    def _guarded(
        self,
        device_id: str,
        outcome: Outcome,
        ts: datetime | None,
        channel: Channel = Channel.TELEMETRY,
    ) -> None:
        """Count (a refusal as a rejection) and log, at most once a minute per device."""
        with self._lock:
            if outcome is not Outcome.REDATED:
                self._rejected[channel.value] += 1
                why = guard_refusal(outcome, self._guard.limits, self._guard.keep_s, ts)
                self._last_rejection = f"rejected {channel.value} from {device_id}: {why}"
            line = self._guard.note(device_id, outcome, time.monotonic(), ts)
        if line is not None:
            logger.warning("%s", line)

    def _parse(self, topic: str) -> tuple[str, Channel] | None:
        try:
            return self._parsed[topic]
        except KeyError:
            pass
        if len(self._parsed) >= _MAX_CACHED_TOPICS:
            self._parsed.clear()
        parsed = self._parsed[topic] = self._topics.parse(topic)
        return parsed

    def handle_batch(
        self, messages: Sequence[tuple[str, bytes]], done: Callable[[], None] | None = None
    ) -> None:
        """:meth:`handle_many` an ingest link's read, then ``done`` once every one of its
        messages is stored or refused (on the batch writer's thread, in order)."""
        self.handle_many(messages)
        if done is not None:
            self._batcher.after_written(done)

    def _count_written(self, count: int) -> None:
        with self._lock:
            self._accepted += count

    def absorb(
        self,
        accepted: int,
        rejected: Mapping[str, int],
        last_rejection: str | None,
        guard: GuardCounts | None = None,
    ) -> None:
        """Add counts an ingest worker process handled (deltas since its previous report)."""
        with self._lock:
            if guard is not None:
                self._guard.absorb(guard)
            self._accepted += accepted
            self._rejected.update(rejected)
            if last_rejection is not None:
                self._last_rejection = last_rejection

    def stats(self) -> IngestCounts:
        """Counts since start, for ``GET /api/v1/ingest``."""
        with self._lock:
            return IngestCounts(
                accepted=self._accepted,
                rejected=sum(self._rejected.values()),
                rejected_by_channel=dict(self._rejected),
                last_rejection=self._last_rejection,
            )

    def guard_stats(self) -> GuardCounts:
        """Telemetry samples the sample guard re-dated or refused since start (with workers')."""
        with self._lock:
            return self._guard.counts()

    def _reject(self, channel: Channel, device_id: str, exc: MessageError) -> None:
        line = f"rejected {channel.value} from {device_id}: {exc.field}: {exc.reason}"
        logger.warning("%s", line)
        with self._lock:
            self._rejected[channel.value] += 1
            self._last_rejection = line

    def _through_outage(self, store: Callable[[], None], what: str) -> None:
        """``store()``, tried again while the database cannot be reached (see the module)."""
        outage: Outage | None = None
        while True:
            try:
                store()
            except ControllerError as exc:
                if not unavailable(exc):
                    raise
                outage = outage or Outage(what, self._outage_limit, exc)
                if not outage.holds():
                    outage.give_up(exc)
                    raise
                outage.pause()
                continue
            if outage is not None:
                outage.over()
            return

    def _revoked_among(self, messages: Sequence[ReportedState | Status]) -> set[str]:
        """The revoked devices among those whose "online" presence is in ``messages``."""
        online = {m.device_id for m in messages if isinstance(m, Status) and m.state != "offline"}
        if not online or self._revoked is None:
            return set()
        return self._revoked(online)

    def _prepared(
        self, message: ReportedState | Status, revoked: set[str]
    ) -> ReportedState | Status:
        """The message as stored: a revoked device's presence is recorded as offline."""
        if (
            isinstance(message, Status)
            and message.state != "offline"
            and message.device_id in revoked
        ):
            logger.info(
                "%s is revoked: its %s status is recorded as offline",
                message.device_id,
                message.state,
            )
            return message.model_copy(update={"state": "offline"})
        return message

    def _store(self, message: ReportedState | Status) -> None:
        """Store reported state or presence (telemetry and events go to the batcher)."""
        message = self._prepared(message, self._revoked_among([message]))
        if isinstance(message, ReportedState):
            self._repo.record_reported(message, self._clock())
        else:
            self._repo.record_status(message, self._clock())


def _decode(channel: Channel, payload: bytes) -> BaseModel:
    """Validate straight from JSON (no intermediate dicts, about half the time and garbage of
    ``json.loads`` then ``model_validate``); a refused payload is decoded again by
    :func:`decode_for` for its field-naming error."""
    try:
        return MESSAGE_TYPES[channel].model_validate_json(payload)
    except ValidationError:
        return decode_for(channel, payload)
