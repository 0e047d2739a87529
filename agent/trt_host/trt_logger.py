"""A TensorRT logger that keeps the errors (TensorRT's own words for a failure) and can feed a
listener with every message (the 8.x build heartbeat, :mod:`.build`).

Severities are compared by identity with ``trt.ILogger.Severity`` members, never by order.
Thread safety: TensorRT calls ``log`` from the thread running the API call; the error list is
appended to only, and read after the call returns.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

Listener = Callable[[str], None]


def make_logger(trt: Any, listener: Optional[Listener] = None) -> Any:
    """A ``trt.ILogger`` subclass instance with ``.errors`` (a list) and ``.take_errors()``."""
    severity = trt.ILogger.Severity
    error_levels = (severity.INTERNAL_ERROR, severity.ERROR)

    class CapturingLogger(trt.ILogger):  # type: ignore[misc]
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self.errors: List[str] = []

        def log(self, level: Any, msg: str) -> None:
            if level in error_levels:
                self.errors.append(str(msg))
            if listener is not None:
                listener(str(msg))

        def take_errors(self) -> List[str]:
            taken, self.errors[:] = list(self.errors), []
            return taken

    return CapturingLogger()
