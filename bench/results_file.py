"""The results file a bench writes itself: title, what it measures against which baseline of the
same run, where the run came from (:class:`bench.provenance.Provenance`), the table it printed
and one summary line a reader can quote. Each run replaces the file."""

from __future__ import annotations

from pathlib import Path

from bench.provenance import Provenance


def render(
    script: str, title: str, about: str, provenance: Provenance, table: str, summary: str
) -> str:
    """The whole file: ``# title``, ``about``, the provenance block, ``table``, `` `summary` ``."""
    return (
        f"# {title}\n\nWritten by `bench/{script}`; each run replaces this file. {about.strip()}"
        f"\n\n{provenance.block()}\n{table.strip()}\n\n`{summary}`\n"
    )


def write(
    out: Path, script: str, title: str, about: str, provenance: Provenance, table: str, summary: str
) -> Path:
    """Write ``out/<script's name>.md``, replacing an earlier run's, and return its path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{Path(script).stem}.md"
    path.write_text(render(script, title, about, provenance, table, summary), encoding="utf-8")
    return path


def ratio(value: float, base: float) -> float:
    """``value / base``; NaN where the baseline is zero."""
    return value / base if base else float("nan")
