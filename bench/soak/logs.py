"""What a process logged during a fault: warnings and errors after a byte offset of its log,
counted and folded (digits become ``N``) so a fault's note says which lines came and how often."""

from __future__ import annotations

import re
from pathlib import Path

LOG_LINE = re.compile(r"^\S+ \S+ (WARNING|ERROR|CRITICAL) (\S+): (.*)$")
"""``2026-12-02 06:45:33,327 WARNING controller.ingest.link: ...`` (the controller's format)."""


def mark(log: Path | None) -> int:
    """The log's size now: pass it to :func:`log_summary` later."""
    return log.stat().st_size if log is not None and log.exists() else 0


def log_summary(log: Path | None, since: int) -> str:
    """Warnings and errors ``log`` got after byte ``since``: counts and the distinct ones."""
    if log is None or not log.exists():
        return "(no log)"
    with log.open("rb") as fh:
        fh.seek(since)
        text = fh.read().decode(errors="replace")
    return summarize(text)


def summarize(text: str) -> str:
    """``"3 ERROR, 1 WARNING: 2x ERROR a: ...; ..."``, or ``"no warnings or errors"``."""
    counts: dict[str, int] = {}
    kinds: dict[str, int] = {}
    for line in text.splitlines():
        m = LOG_LINE.match(line)
        if m is None:
            if line.startswith("Traceback"):
                kinds["Traceback"] = kinds.get("Traceback", 0) + 1
            continue
        level, name, message = m.groups()
        kinds[level] = kinds.get(level, 0) + 1
        key = f"{level} {name}: {re.sub(r'[0-9]+', 'N', message)[:140]}"
        counts[key] = counts.get(key, 0) + 1
    if not kinds:
        return "no warnings or errors"
    head = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    distinct = "; ".join(f"{n}x {k}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return f"{head}: {distinct}"
