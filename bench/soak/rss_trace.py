"""RSS of the soak's long-lived processes every ``interval_s``, to tell warm-up from a leak.

The leak line (:func:`bench.soak.measure.leaks`) compares a process life's start with its end.
A controller restarted mid-run starts small and fills its caches (SQLAlchemy's compiled
statements, the pools, the rollout and ingest state of the whole fleet) over its first minutes,
so start-to-end growth alone cannot say whether memory keeps growing. The trace can: the RSS at
each quarter of the process's last life, and the growth over its second half, which a leak keeps
and a warm-up does not have.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

Pids = Callable[[], dict[str, int | None]]


@dataclass(frozen=True)
class RssSample:
    at: float
    """Seconds since the trace started."""
    pid: int
    rss: int


def _rss(pid: int) -> int:
    """RSS of ``pid`` and its children (as :func:`bench.soak.measure.snapshot` counts it)."""
    proc = psutil.Process(pid)
    total = 0
    for p in (proc, *proc.children(recursive=True)):
        with contextlib.suppress(psutil.NoSuchProcess):
            total += p.memory_info().rss
    return total


class RssTrace:
    """Samples the processes ``pids()`` names on a thread until :meth:`stop`."""

    def __init__(self, pids: Pids, interval_s: float = 30.0) -> None:
        self._pids = pids
        self._interval = interval_s
        self._stop = threading.Event()
        self._t0 = time.monotonic()
        self.samples: dict[str, list[RssSample]] = {}
        self._thread = threading.Thread(target=self._run, name="rss-trace", daemon=True)

    def start(self) -> RssTrace:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            at = time.monotonic() - self._t0
            for name, pid in self._pids().items():
                if pid is None:
                    continue
                with contextlib.suppress(psutil.Error):
                    sample = RssSample(at, pid, _rss(pid))
                    self.samples.setdefault(name, []).append(sample)
            self._stop.wait(self._interval)

    def trend(self, name: str, pid: int) -> str | None:
        """``name``'s last life (``pid``) as the RSS at each quarter and its second-half growth;
        None with fewer than 5 samples of that life."""
        life = [s for s in self.samples.get(name, []) if s.pid == pid]
        if len(life) < 5:
            return None
        quarters = [life[round(i * (len(life) - 1) / 4)] for i in range(5)]
        mid, end = quarters[2].rss, quarters[4].rss
        steps = " → ".join(f"{s.rss / 2**20:.1f}" for s in quarters)
        span = life[-1].at - life[0].at
        return (
            f"{name} RSS over its last life ({span / 60:.1f} min, {len(life)} samples), at each "
            f"quarter: {steps} MiB; second half {100 * (end - mid) / mid:+.1f} %"
        )
