"""Telemetry: one health sample per interval, on its own thread, sent through the outbox.

:func:`telemetry_sample` is the pure translation of a :class:`HealthReadings` into the wire
``Telemetry``; :class:`TelemetryLoop` runs the sampler every ``interval_s`` so a long engine
build on the reconcile loop never delays telemetry. Sample ids are ``<device>:<boot>:<seq>``:
unique across restarts, ordered within one, and the controller's idempotency key.

The sampling thread runs under :class:`shared.supervision.Supervised` (policy ``restart``): a
sample that raises is logged with the thread's name and sampling goes on after a short backoff,
so one bad sample never ends telemetry. The sequence number lives on the loop, not the thread,
so ids stay unique across such restarts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone

from agent.link.outbox import Outbox
from agent.telemetry.collectors.health import HealthReadings, HealthSampler
from shared.supervision import Supervised
from shared.telemetry import Telemetry
from shared.topics import Channel

log = logging.getLogger(__name__)


def telemetry_sample(
    device_id: str,
    sample_id: str,
    ts: datetime,
    interval_s: float,
    readings: HealthReadings,
    spool_dropped: int | None,
) -> Telemetry:
    """The wire sample of ``readings``; a host collector that failed reports zero load."""
    host = readings.host if readings.host is not None and readings.host.available else None
    inference = readings.inference
    models = inference.models if inference is not None and inference.available else ()
    return Telemetry(
        device_id=device_id,
        sample_id=sample_id,
        ts=ts,
        interval_s=max(interval_s, 1e-3),
        cpu_percent=(host.cpu_percent if host else None) or 0.0,
        memory_used_bytes=(host.memory_used_bytes if host else None) or 0,
        memory_total_bytes=(host.memory_total_bytes if host else None) or 0,
        models=models,
        spool_dropped=spool_dropped,
        **readings.telemetry_fields(),
    )


class TelemetryLoop:
    """Samples every ``interval_s`` on a daemon thread and sends each sample to the outbox."""

    def __init__(
        self,
        device_id: str,
        boot: str,
        sampler: HealthSampler,
        outbox: Outbox,
        interval_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._device_id = device_id
        self._boot = boot
        self._sampler = sampler
        self._outbox = outbox
        self._interval_s = interval_s
        self._clock = clock
        self._seq = 0
        self._stop = threading.Event()
        self._thread: Supervised | None = None

    def sample(self, elapsed_s: float) -> Telemetry:
        """Take one sample now (covering ``elapsed_s``) and spool it."""
        self._seq += 1
        sample = telemetry_sample(
            self._device_id,
            f"{self._device_id}:{self._boot}:{self._seq}",
            datetime.now(timezone.utc),
            elapsed_s,
            self._sampler.collect(),
            self._outbox.dropped,
        )
        self._outbox.send(Channel.TELEMETRY, sample, sample.sample_id)
        return sample

    def start(self) -> None:
        """Sample on a supervised daemon thread until :meth:`stop`."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = Supervised(
            "telemetry", self._run, policy="restart", stop=self._stop, logger=log
        ).start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop sampling (after the sample in progress)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout_s)

    def _run(self) -> None:
        """The thread's body: one sample per interval until stopped (a raise restarts it)."""
        last = self._clock()
        while not self._stop.wait(max(0.0, last + self._interval_s - self._clock())):
            now = self._clock()
            self.sample(now - last)
            last = now
