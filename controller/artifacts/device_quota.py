"""How many bytes one device may upload to the artifact store in a day (pure).

A device token may POST artifacts (its engine builds, before their manifests). Before this quota
nothing bounded how much: one gateway credential could fill the controller's disk or object
store with junk. Each device may upload :data:`BYTES_PER_DAY` in any :data:`WINDOW_S` (24 h),
counted as the bytes arrive (an upload of content already stored counts too: the controller
received and hashed it); past it the upload is refused with 429, nothing of it stored, and the
answer says when room frees up. Operators' uploads are not counted.

Kept in the memory of each controller process: N replicas behind a load balancer allow up to N
times the quota, and a restart forgets it. The default (8 GiB, four of the largest uploads a
controller takes by default) leaves room for every legitimate pattern: a device uploads only
engines it built itself, one per model version and tuning.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from controller.errors import QuotaExceeded

BYTES_PER_DAY = 8 * 1024**3
WINDOW_S = 24 * 3600.0
_SLOT_S = 60.0
"""Uploads are summed per minute: a device's history is at most 1,440 entries."""
MAX_DEVICES = 100_000


class DeviceUploadQuota:
    """Thread-safe; ``clock`` (monotonic seconds) is injectable for tests."""

    def __init__(
        self,
        bytes_per_window: int = BYTES_PER_DAY,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.bytes_per_window = bytes_per_window
        self.window_s = window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._used: dict[str, deque[list[float]]] = {}

    def charge(self, device_id: str, size: int) -> None:
        """Count ``size`` more bytes from ``device_id``; :class:`QuotaExceeded` (nothing
        counted) when that passes the quota."""
        now = self._clock()
        with self._lock:
            history = self._used.pop(device_id, None) or deque()
            while history and history[0][0] <= now - self.window_s:
                history.popleft()
            used = sum(amount for _, amount in history)
            self._used[device_id] = history  # most recently used last
            while len(self._used) > MAX_DEVICES:
                del self._used[next(iter(self._used))]
            if used + size > self.bytes_per_window:
                frees = history[0][0] + self.window_s - now if history else 0.0
                raise QuotaExceeded(
                    f"device {device_id!r} uploaded {used:,} bytes in the last "
                    f"{self.window_s / 3600:g} h; this upload would pass its quota of "
                    f"{self.bytes_per_window:,} bytes: nothing of it was stored; room frees up "
                    f"in {max(frees, 1.0):.0f} s",
                    retry_after_s=max(frees, 1.0),
                )
            if history and now - history[-1][0] < _SLOT_S:
                history[-1][1] += size
            else:
                history.append([now, float(size)])
