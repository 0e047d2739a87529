"""Board fixture trees under ``tests/fixtures/telemetry/<name>/`` and a replaying tool runner."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from agent.hardware.commands import NOT_INSTALLED

BOARDS = Path(__file__).resolve().parents[3] / "fixtures" / "telemetry"
JETSONS = ("orin-nano-8gb", "agx-orin-64gb", "xavier-nx")


def board_root(name: str) -> Path:
    return BOARDS / name / "root"


class ReplayRunner:
    """Answers tools from a board's ``commands.json``; unknown tools are 'not installed'."""

    def __init__(self, name: str) -> None:
        recorded = json.loads((BOARDS / name / "commands.json").read_text())
        self.answers = {argv: (int(a["rc"]), str(a["out"])) for argv, a in recorded.items()}
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str]) -> tuple[int, str]:
        self.calls.append(tuple(argv))
        return self.answers.get(
            " ".join(argv), (NOT_INSTALLED, f"{argv[0]} not installed (not found on PATH)")
        )
