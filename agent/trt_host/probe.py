"""``<python> -m agent.trt_host.probe``: what this interpreter offers the TensorRT host, as JSON.

The agent (:mod:`agent.hardware.trt_python`) runs this under each candidate interpreter (the
``tensorrt_python`` setting, then JetPack's system Pythons, then its own) from a directory holding
only ``agent/__init__.py`` and ``agent/trt_host`` (:func:`agent.trt_host.launch.isolated_root`),
with a timeout, and reads one line from stdout: :data:`MARKER` followed by a JSON object
(:func:`answer`). Importing TensorRT and creating a runtime happen here, never in the agent's
process: a TensorRT that aborts kills this child only.

Fields: ``python`` (version), ``executable``; ``tensorrt_version`` or ``import_error``;
``supported`` and ``unsupported_reason`` (decided by :mod:`.versions`); ``runtime_created``,
``runtime_error`` and ``dla_cores`` (``IRuntime.num_DLA_cores``, as Triton does); and, through
:mod:`.cudart` (no cuda-python needed), ``cuda_runtime_version``, ``cuda_driver_version``,
``cuda_devices`` or ``cuda_error``. Python 3.8 syntax, standard library only (tensorrt imported
inside :func:`answer`).
"""

from __future__ import annotations

import json
import platform
import sys
from typing import Any, Dict, Optional

from .cudart import CudaError, CudaRuntime, CudaUnavailable
from .versions import Capabilities, UnsupportedTensorRT

MARKER = "JETFLEET-TRT-PROBE "
"""Prefix of the answer line (TensorRT or CUDA may print lines of their own)."""


def cuda_version_text(encoded: int) -> Optional[str]:
    """CUDA's integer version (``12060``) → ``"12.6"``; None for 0 (no driver)."""
    if encoded <= 0:
        return None
    return "%d.%d" % (encoded // 1000, (encoded % 1000) // 10)


def _cuda(found: Dict[str, Any]) -> bool:
    """Fill the CUDA fields; False when a loaded libcudart says no device can answer."""
    try:
        cuda = CudaRuntime()
    except (CudaUnavailable, OSError, AttributeError) as exc:
        found["cuda_error"] = str(exc)
        return True  # pip's tensorrt may bring a libcudart this search does not see
    try:
        found["cuda_runtime_version"] = cuda_version_text(cuda.runtime_version())
        found["cuda_driver_version"] = cuda_version_text(cuda.driver_version())
        found["cuda_devices"] = cuda.device_count()
    except (CudaUnavailable, CudaError) as exc:
        found["cuda_error"] = str(exc)
        return False
    return True


def answer() -> Dict[str, Any]:
    """Everything this interpreter can say about TensorRT and CUDA (never raises)."""
    found: Dict[str, Any] = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "tensorrt_version": None,
        "import_error": None,
        "supported": False,
        "unsupported_reason": None,
        "runtime_created": False,
        "runtime_error": None,
        "dla_cores": None,
        "cuda_runtime_version": None,
        "cuda_driver_version": None,
        "cuda_devices": None,
        "cuda_error": None,
    }
    device_may_answer = _cuda(found)
    try:
        import tensorrt as trt
    except (ImportError, OSError, RuntimeError) as exc:  # also: a library that fails to load
        found["import_error"] = "%s: %s" % (type(exc).__name__, exc)
        return found
    found["tensorrt_version"] = str(getattr(trt, "__version__", "unknown"))
    try:
        Capabilities.for_version(found["tensorrt_version"])
        found["supported"] = True
    except UnsupportedTensorRT as exc:
        found["unsupported_reason"] = str(exc)
    if not device_may_answer:
        found["runtime_error"] = "not tried: " + str(found["cuda_error"])
        return found
    try:
        runtime = trt.Runtime(trt.Logger(trt.Logger.ERROR))
        found["dla_cores"] = int(runtime.num_DLA_cores)
        found["runtime_created"] = True
    except (TypeError, RuntimeError, AttributeError, ValueError) as exc:  # failed CUDA init
        found["runtime_error"] = "%s: %s" % (type(exc).__name__, exc)
    return found


def main() -> int:
    sys.stdout.write(MARKER + json.dumps(answer(), sort_keys=True) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
