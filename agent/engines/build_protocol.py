"""What passes between the agent and a builder child process.

The parent writes a :class:`BuildRequest` as JSON to a file and starts
``python -m agent.engines.<builder> <request file>``. The child prints progress as lines
``JETFLEET-PROGRESS <percent> <message>`` on stdout, writes the engine to ``output_path`` and
exits 0; or it prints its own error lines on stderr and exits non-zero. Nothing here imports a
runtime library, so the parent never loads ONNX Runtime's or TensorRT's builder state.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from shared.delegate import DelegateConfig

PROGRESS_PREFIX = "JETFLEET-PROGRESS "
EXIT_BUILD_FAILED = 3


class BuildRequest(BaseModel):
    """One build: the ONNX file, where the engine goes, and how to build it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    onnx_path: Path
    output_path: Path
    config: DelegateConfig
    timing_cache_path: Path | None = None
    calibration_cache_path: Path | None = None
    calibration_inputs_path: Path | None = None  # sample inputs NPZ (input:<tensor>)
    dla_cores: int | None = None


class BuilderError(Exception):
    """Raised inside a builder child: ``lines`` are the builder's own error lines."""

    def __init__(self, lines: Sequence[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = list(lines)


Progress = Callable[[float, str], None]


def report_progress(percent: float, message: str) -> None:
    """Tell the parent how far the build is (0-100)."""
    print(f"{PROGRESS_PREFIX}{percent:.1f} {message}", flush=True)


def parse_progress(line: str) -> tuple[float, str] | None:
    """``(percent, message)`` of a progress line; None for any other output."""
    if not line.startswith(PROGRESS_PREFIX):
        return None
    head, _, message = line[len(PROGRESS_PREFIX) :].partition(" ")
    try:
        return float(head), message.strip()
    except ValueError:
        return None


def child_main(build: Callable[[BuildRequest, Progress], None], argv: Sequence[str]) -> int:
    """Entry point of a builder child: parse the request, build, map failures to stderr lines."""
    if len(argv) != 2:
        print(f"usage: {argv[0]} REQUEST.json", file=sys.stderr)
        return 2
    request = BuildRequest.model_validate_json(Path(argv[1]).read_bytes())
    try:
        build(request, report_progress)
    except BuilderError as exc:
        for line in exc.lines:
            print(line, file=sys.stderr, flush=True)
        return EXIT_BUILD_FAILED
    except Exception:  # noqa: BLE001 - the child's last word goes to the parent verbatim
        traceback.print_exc(file=sys.stderr)
        return EXIT_BUILD_FAILED
    return 0
