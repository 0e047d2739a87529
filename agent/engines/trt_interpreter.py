"""Which Python runs the TensorRT host and its build children, and how to start it there.

TensorRT's Python bindings come with JetPack for JetPack's own Python
(docs/architecture.md#the-tensorrt-host), so everything TensorRT runs as ``<interpreter> -m
agent.trt_host...`` with ``PYTHONPATH`` pointing at a directory that holds only ``agent/trt_host``
(another Python cannot use this one's site-packages). The interpreter is the ``tensorrt_python``
setting when the daemon passes it (:func:`configure`), else ``JETFLEET_TENSORRT_PYTHON``, else what
:func:`agent.hardware.trt_python.find_tensorrt_python` finds among the interpreters JetPack ships.

**Test-only:** ``JETFLEET_TEST_TRT_HOST_BACKEND=onnxruntime`` makes TensorRT hosts serve with the
host's CPU backend under this interpreter, so CI runs a real slot of runtime ``tensorrt``
through the host wiring where TensorRT cannot run. Never set in production: the slot would be
served by ONNX Runtime while reported as ``tensorrt``. Build children are unaffected.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from agent.errors import ModelLoadError
from agent.hardware.trt_python import find_tensorrt_python
from agent.trt_host import launch

ENV_INTERPRETER = "JETFLEET_TENSORRT_PYTHON"
ENV_TEST_BACKEND = "JETFLEET_TEST_TRT_HOST_BACKEND"
HOST_BUILDER = "agent.trt_host.build_child"
"""The module a TensorRT build runs as, under the TensorRT interpreter."""

_lock = threading.Lock()
_configured: str | None = None
_roots: dict[str, Path] = {}


class TensorRTPythonMissing(ModelLoadError):
    """No interpreter here can ``import tensorrt``; the message says what to install or set."""


@dataclass(frozen=True)
class Launch:
    """How to start a TensorRT host or build child: interpreter, backend, environment, cwd."""

    interpreter: str
    backend: str
    pythonpath: str


def configure(tensorrt_python: str | None) -> None:
    """The ``tensorrt_python`` setting (the daemon calls this once at start)."""
    global _configured
    _configured = tensorrt_python


def isolated_root() -> Path:
    """One :func:`agent.trt_host.launch.isolated_root` per process (removed with its temp dir)."""
    with _lock:
        root = _roots.get("isolated")
        if root is None or not root.exists():
            root = launch.isolated_root("jetfleet-trt-")
            _roots["isolated"] = root
        return root


def _find(configured: str | None) -> str:
    found = find_tensorrt_python(configured)
    if found.interpreter is None:
        raise TensorRTPythonMissing(
            f"no Python here can import tensorrt: {found.reason or 'not found'} "
            f"(set tensorrt_python / {ENV_INTERPRETER}, or install JetPack's python3-libnvinfer)"
        )
    return str(found.interpreter)


def tensorrt_launch(*, for_build: bool = False) -> Launch:
    """Where TensorRT runs (TensorRTPythonMissing when nowhere); see the module docstring."""
    test_backend = os.environ.get(ENV_TEST_BACKEND)
    if test_backend and not for_build:
        return Launch(sys.executable, test_backend, str(launch.package_root()))
    interpreter = _find(_configured or os.environ.get(ENV_INTERPRETER) or None)
    same = os.path.realpath(interpreter) == os.path.realpath(sys.executable)
    root = launch.package_root() if same else isolated_root()
    return Launch(interpreter, "tensorrt", str(root))
