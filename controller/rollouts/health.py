"""Inference health of one model on one device from telemetry windows (pure).

Telemetry carries per-window counters (requests, errors, p99). A device's health over a period
is the sum of requests and errors, and the request-weighted mean of the windows' p99 (a window
without a p99 does not count towards it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from controller.rollouts.model import Baseline


def summarize(
    windows: Iterable[Iterable[Mapping[str, Any]]], model: str | None, version: str | None
) -> Baseline:
    """Sum ``model``'s stats (only ``version``'s when given; every model's when ``model`` is
    None, as an agent rollout gates on) over telemetry ``windows``.

    Each window is a sample's ``models`` list (ModelStats as JSON).
    """
    requests = errors = 0
    weighted = 0.0
    weight = 0
    for models in windows:
        for stats in models:
            if model is not None and stats.get("name") != model:
                continue
            if version is not None and stats.get("version") not in (None, version):
                continue
            n, e = int(stats.get("requests") or 0), int(stats.get("errors") or 0)
            requests += n
            errors += e
            p99 = stats.get("latency_p99_ms")
            if p99 is not None and n > 0:
                weighted += float(p99) * n
                weight += n
    return Baseline(requests, errors, weighted / weight if weight else None)
