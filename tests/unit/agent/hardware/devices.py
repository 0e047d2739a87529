"""Recorded device trees and tool outputs under ``tests/fixtures/devices/<name>/``.

``root/`` is the file tree the probe reads instead of ``/``; ``commands.json`` holds what each
tool printed on that board. A tool missing from it answers like the real runner does for a tool
that is not installed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from agent.hardware.commands import NOT_INSTALLED

DEVICES = Path(__file__).resolve().parents[3] / "fixtures" / "devices"
JETSONS = ("orin-nano-8gb", "orin-nx-16gb", "agx-orin-64gb", "xavier-nx")
X86 = ("x86-dgpu", "plain-x86")


def device_root(name: str) -> Path:
    return DEVICES / name / "root"


class ReplayRunner:
    """A command runner answering from a device's ``commands.json``; it records what ran."""

    def __init__(self, name: str) -> None:
        recorded = json.loads((DEVICES / name / "commands.json").read_text())
        self.answers = {argv: (int(a["rc"]), str(a["out"])) for argv, a in recorded.items()}
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str]) -> tuple[int, str]:
        self.calls.append(tuple(argv))
        key = " ".join(argv)
        if key in self.answers:
            return self.answers[key]
        return NOT_INSTALLED, f"{argv[0]} not installed (not found on PATH)"
