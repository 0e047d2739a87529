"""What the scale bench counts: CPU seconds per part (sampled from /proc through psutil),
telemetry produced against stored, and wave timings from the rollout rows and the gateways.

The counting functions are pure; :class:`CpuMeter` reads processes.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

import psutil

from bench.scale.fleet_db import TargetRow
from bench.scale.gateways import DeviceView

PidSource = Callable[[], Iterable[int]]
MACHINE = "machine"


class CpuMeter:
    """User + system CPU seconds of each part's processes (and their children), sampled once a
    second. A process keeps its last sampled figure after it ends (a killed replica still
    counts); what a process spent in its last second before it ended, and a process that lived
    less than a second (a short database connection), is missed."""

    def __init__(self, parts: dict[str, PidSource], interval_s: float = 1.0) -> None:
        self._parts = parts
        self._interval = interval_s
        self._seen: dict[str, dict[int, float]] = {name: {} for name in parts}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scale-cpu", daemon=True)
        self.marks: dict[str, dict[str, float]] = {}
        self.mark_times: dict[str, float] = {}

    def start(self) -> CpuMeter:
        self.sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.sample()

    def sample(self) -> None:
        for name, source in self._parts.items():
            pids: set[int] = set()
            for pid in source():
                pids.add(pid)
                try:
                    pids.update(c.pid for c in psutil.Process(pid).children(recursive=True))
                except psutil.Error:
                    continue
            for pid in pids:
                try:
                    t = psutil.Process(pid).cpu_times()
                except psutil.Error:
                    continue
                with self._lock:
                    # key by (pid, start) would be exact; pids do not wrap within a run here
                    self._seen[name][pid] = max(self._seen[name].get(pid, 0.0), t.user + t.system)

    def totals(self) -> dict[str, float]:
        """CPU seconds per part so far, and ``machine``: every process on the host (busy time
        of all CPUs), which on a shared machine includes other people's work."""
        with self._lock:
            out = {name: sum(seen.values()) for name, seen in self._seen.items()}
        t = psutil.cpu_times()
        out[MACHINE] = t.user + t.nice + t.system + t.irq + t.softirq + getattr(t, "steal", 0.0)
        return out

    def processes(self) -> dict[str, int]:
        with self._lock:
            return {name: len(seen) for name, seen in self._seen.items()}

    def mark(self, name: str) -> None:
        self.sample()
        self.marks[name] = self.totals()
        self.mark_times[name] = time.monotonic()

    def between(self, start: str, end: str) -> tuple[dict[str, float], float]:
        """CPU seconds per part between two marks, and the seconds between them."""
        a, b = self.marks[start], self.marks[end]
        return {k: b[k] - a.get(k, 0.0) for k in b}, self.mark_times[end] - self.mark_times[start]


def postgres_backends(database: str) -> Callable[[], list[int]]:
    """PostgreSQL's backend processes serving ``database`` (their title names it)."""

    def pids() -> list[int]:
        found = []
        for p in psutil.process_iter(["name", "cmdline"]):
            try:
                if p.info["name"] != "postgres":
                    continue
                title = " ".join(p.info["cmdline"] or ())
            except psutil.Error:
                continue
            if f" {database} " in f" {title} ":
                found.append(p.pid)
        return found

    return pids


@dataclass(frozen=True)
class TelemetryCount:
    produced: int
    stored: int
    """Distinct sample ids stored."""
    waiting: int
    """Produced, not acknowledged by the broker yet (still in a gateway's spool at the end)."""
    lost: int
    """Neither stored nor waiting."""
    duplicated: int
    """Rows beyond the first for one sample id ((device_id, sample_id) is unique: expected 0)."""
    lost_ids: tuple[str, ...] = ()


def count_telemetry(views: Iterable[DeviceView], stored: Iterable[str]) -> TelemetryCount:
    """Produced is every id ``<device>:<boot>:1..n`` the gateways made; lost is a produced id
    neither stored nor still waiting in its gateway; duplicated counts rows beyond the first."""
    rows = Counter(stored)
    produced = waiting = 0
    missing: list[str] = []
    for v in views:
        produced += v.produced
        held = set(v.waiting)
        waiting += len(held)
        missing += [
            sid
            for n in range(1, v.produced + 1)
            if (sid := f"{v.device_id}:{v.boot}:{n}") not in rows and sid not in held
        ]
    return TelemetryCount(
        produced=produced,
        stored=len(rows),
        waiting=waiting,
        lost=len(missing),
        duplicated=sum(n - 1 for n in rows.values()),
        lost_ids=tuple(missing[:20]),
    )


@dataclass(frozen=True)
class WaveTime:
    wave: int
    """1-based."""
    devices: int
    started_s: float
    """From the rollout's creation to the wave's first device started."""
    first_doc_s: float | None
    """From creation to the first gateway of the wave receiving its new document."""
    last_report_s: float | None
    """From creation to the last gateway of the wave reporting it serves the new version."""
    done_s: float | None
    """From creation to the wave's last device validated (the controller saw it serve)."""

    @property
    def seconds(self) -> float | None:
        """First device started → last device validated."""
        return None if self.done_s is None else self.done_s - self.started_s


@dataclass
class RolloutTimes:
    version: str
    rollout_id: str
    state: str
    converged_s: float | None
    """Creation → the rollout's state succeeded (the rollout row's timestamps)."""
    waves: list[WaveTime] = field(default_factory=list)


def wave_times(
    version: str,
    rollout_id: str,
    state: str,
    created: datetime,
    finished: datetime | None,
    targets: list[TargetRow],
    views: dict[str, DeviceView],
) -> RolloutTimes:
    t0 = created.timestamp()
    out = RolloutTimes(
        version, rollout_id, state, None if finished is None else finished.timestamp() - t0
    )
    for wave in sorted({t.wave for t in targets}):
        ts = [t for t in targets if t.wave == wave]
        started = [t.started_at.timestamp() for t in ts if t.started_at is not None]
        validated = [t.validated_at.timestamp() for t in ts if t.validated_at is not None]
        docs = [
            v.received[version]
            for t in ts
            if (v := views.get(t.device_id)) is not None and version in v.received
        ]
        reports = [
            v.reported[version]
            for t in ts
            if (v := views.get(t.device_id)) is not None and version in v.reported
        ]
        out.waves.append(
            WaveTime(
                wave=wave + 1,
                devices=len(ts),
                started_s=(min(started) - t0) if started else float("nan"),
                first_doc_s=(min(docs) - t0) if docs else None,
                last_report_s=(max(reports) - t0) if reports else None,
                done_s=(max(validated) - t0) if len(validated) == len(ts) else None,
            )
        )
    return out
