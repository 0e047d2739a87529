"""Output for people (aligned tables) and for scripts (JSON)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import click


def emit_json(value: Any) -> None:
    """Print ``value`` as indented JSON (the ``--json`` form of every command)."""
    click.echo(json.dumps(value, indent=2, sort_keys=True, default=str))


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain aligned text table; ``None`` cells print as ``-``."""
    cells = [[("-" if c is None else str(c)) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    lines = ["  ".join(h.upper().ljust(widths[i]) for i, h in enumerate(headers)).rstrip()]
    lines += ["  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip() for row in cells]
    return "\n".join(lines)


def ago(ts: str | None, now: datetime | None = None) -> str | None:
    """``'12s ago'`` for an ISO timestamp, None when there is none."""
    if not ts:
        return None
    then = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    if then.tzinfo is None:
        then = then.replace(tzinfo=timezone.utc)
    seconds = int(((now or datetime.now(timezone.utc)) - then).total_seconds())
    if seconds < 120:
        return f"{max(seconds, 0)}s ago"
    if seconds < 7200:
        return f"{seconds // 60}m ago"
    return f"{seconds // 3600}h ago"


def ms(value: float | None) -> str | None:
    """Milliseconds with two decimals, None kept."""
    return None if value is None else f"{value:.2f}"
