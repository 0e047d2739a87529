"""One TensorRT logger per process that hands each operation its own errors.

TensorRT keeps the first ``ILogger`` a process gives it (NVIDIA/TensorRT#1475: later
``Runtime``/``Builder``/``Refitter`` loggers are not used), so a capturing logger per engine
caught its errors in the first engine's list: later failures read "no reason logged" or another
engine's words, and after the first engine unloaded TensorRT could call a freed logger. So every
``make_logger`` call returns the same logger (one per ``tensorrt`` module, for the conformance
suite's several releases), and :meth:`begin` starts an *operation* on the calling thread: the
errors TensorRT logs from that thread (it logs from the thread running the API call) go to that
operation's list, which ``take_errors`` empties. A message from a thread that began nothing (a
builder worker) goes to the operation begun last. ``listener`` sees every message of its
operation (the 8.x build heartbeat, :mod:`.build`).

Severities are compared by identity with ``trt.ILogger.Severity`` members, never by order.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

Listener = Callable[[str], None]

_LOCK = threading.Lock()
_LOGGERS: Dict[int, Tuple[Any, Any]] = {}  # id(trt module) → (module, its logger)


class _Operation:
    def __init__(self, listener: Optional[Listener]) -> None:
        self.errors: List[str] = []
        self.listener = listener


def _create(trt: Any) -> Any:
    severity = trt.ILogger.Severity
    error_levels = (severity.INTERNAL_ERROR, severity.ERROR)

    class ProcessLogger(trt.ILogger):  # type: ignore[misc]
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self._local = threading.local()
            self._last = _Operation(None)

        def _operation(self) -> _Operation:
            found = getattr(self._local, "operation", None)
            return found if found is not None else self._last

        def begin(self, listener: Optional[Listener] = None) -> None:
            """Start an operation on this thread: errors and messages from here on are its."""
            operation = _Operation(listener)
            self._local.operation = self._last = operation

        @property
        def errors(self) -> List[str]:
            return self._operation().errors

        def log(self, level: Any, msg: str) -> None:
            operation = self._operation()
            if level in error_levels:
                operation.errors.append(str(msg))
            if operation.listener is not None:
                operation.listener(str(msg))

        def take_errors(self) -> List[str]:
            errors = self._operation().errors
            taken, errors[:] = list(errors), []
            return taken

    return ProcessLogger()


def process_logger(trt: Any) -> Any:
    """The one ``trt.ILogger`` of this process for ``trt`` (made on first use)."""
    with _LOCK:
        found = _LOGGERS.get(id(trt))
        if found is None or found[0] is not trt:
            found = (trt, _create(trt))
            _LOGGERS[id(trt)] = found
        return found[1]


def make_logger(trt: Any, listener: Optional[Listener] = None) -> Any:
    """The process logger with an operation begun on this thread (see the module docstring):
    ``.errors``, ``.take_errors()`` and ``.begin()`` are this thread's operation's."""
    logger = process_logger(trt)
    logger.begin(listener)
    return logger
