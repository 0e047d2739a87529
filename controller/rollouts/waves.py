"""Wave planning (pure): which device goes in which wave.

Waves are cumulative, like AWS IoT job rollouts: ``1,10%,50%,100%`` means one device first,
then up to 10 % of the targets, then half, then all. Percents round up, so every wave holds at
least one new device; canary devices are always in the first wave (it grows to hold them all),
and a last wave adds whatever the spec leaves out, so every target is in some wave.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from controller.errors import InvalidInput

_STEP = re.compile(r"^(\d+(?:\.\d+)?)(%?)$")


@dataclass(frozen=True)
class WaveStep:
    """One cumulative step: ``amount`` devices, or ``amount`` percent of the targets."""

    amount: float
    percent: bool

    def cumulative(self, total: int) -> int:
        if self.percent:
            return min(total, math.ceil(total * self.amount / 100.0 - 1e-9))
        return min(total, int(self.amount))


def parse_waves(text: str) -> tuple[WaveStep, ...]:
    """Parse ``1,10%,50%,100%``; the error names the bad step."""
    steps: list[WaveStep] = []
    for raw in text.split(","):
        match = _STEP.match(raw.strip())
        if match is None:
            raise InvalidInput(
                f"invalid wave {raw.strip()!r} in {text!r}: use counts and percents, "
                "e.g. 1,10%,50%,100%"
            )
        amount, percent = float(match.group(1)), bool(match.group(2))
        if amount <= 0 or (percent and amount > 100) or (not percent and amount % 1):
            raise InvalidInput(
                f"invalid wave {raw.strip()!r} in {text!r}: a count is a whole number ≥ 1, "
                "a percent is in (0, 100]"
            )
        steps.append(WaveStep(amount, percent))
    return tuple(steps)


def plan_waves(
    devices: Sequence[str], steps: Sequence[WaveStep], canary: Sequence[str] = ()
) -> list[list[str]]:
    """Split ``devices`` into waves (canaries first, then the rest in the given order).

    Empty waves are dropped, so the result has one list per wave that updates something.
    """
    missing = sorted(set(canary) - set(devices))
    if missing:
        raise InvalidInput(
            f"canary device(s) {', '.join(missing)} are not among the rollout's targets: "
            "check --canary against the selector"
        )
    ordered = [*canary, *(d for d in devices if d not in set(canary))]
    total = len(ordered)
    waves: list[list[str]] = []
    done = 0
    for index, step in enumerate(steps):
        upto = step.cumulative(total)
        if index == 0:
            upto = max(upto, len(canary))
        if upto > done:
            waves.append(ordered[done:upto])
            done = upto
    if done < total:
        waves.append(ordered[done:])
    return waves
