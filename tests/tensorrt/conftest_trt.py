"""The skip every ``tensorrt`` test shares: TensorRT runs under the TensorRT interpreter, never in
the agent, so "TensorRT is here" means that interpreter imports it and sees a CUDA device."""

from __future__ import annotations

import os
import subprocess

import pytest

CHECK = (
    "import tensorrt as t; from agent.trt_host.cudart import CudaRuntime; "
    "CudaRuntime().device_count(); print(t.__version__)"
)


def _check() -> tuple[str | None, str]:
    """(why TensorRT cannot run here or None, the version the TensorRT interpreter imports)."""
    from agent.engines.trt_interpreter import tensorrt_launch

    try:
        launch = tensorrt_launch(for_build=True)
    except Exception as exc:
        return f"no TensorRT interpreter: {exc}", ""
    done = subprocess.run(
        [launch.interpreter, "-c", CHECK],
        capture_output=True,
        text=True,
        cwd=launch.pythonpath,
        env={"PYTHONPATH": launch.pythonpath, "PATH": "/usr/bin:/bin"},
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"{launch.interpreter} cannot run TensorRT with a CUDA device: {last}", ""
    return None, done.stdout.strip().splitlines()[-1]


def tensorrt_here() -> str | None:
    """Why TensorRT cannot run here, or None when it can."""
    return _check()[0]


def skip_without_tensorrt() -> None:
    reason = tensorrt_here()
    if reason is not None:
        pytest.skip(reason, allow_module_level=True)


def tensorrt_version() -> str:
    """The version of TensorRT the TensorRT interpreter imports (call after the skip)."""
    return _check()[1]


LIBRARY_CHECK = r"""
import ctypes, os, tensorrt
here = os.path.dirname(tensorrt.__file__)
def usable(names, create):
    for name in names:
        for path in (os.path.join(here, name), name):
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            handle = ctypes.c_void_p()
            return getattr(lib, create)(ctypes.byref(handle)) == 0
    return False
missing = []
if not usable(["libcublasLt.so.12", "libcublasLt.so.11"], "cublasLtCreate"):
    missing.append("CUBLAS_LT")
if not usable(["libcublas.so.12", "libcublas.so.11"], "cublasCreate_v2"):
    missing.append("CUBLAS")
if not usable(["libcudnn.so.9", "libcudnn.so.8"], "cudnnCreate"):
    missing.append("CUDNN")
print(",".join(missing))
"""


def missing_tactic_libraries() -> tuple[str, ...]:
    """The tactic sources (CUBLAS, CUBLAS_LT, CUDNN) whose library the TensorRT interpreter
    cannot load and initialise next to TensorRT or on its library path: the GPU test host has
    stubs that answer "not initialized" (docs/development.md), a JetPack has the real ones.
    A build must turn these off. Call after the skip."""
    from agent.engines.trt_interpreter import tensorrt_launch

    launch = tensorrt_launch(for_build=True)
    done = subprocess.run(
        [launch.interpreter, "-c", LIBRARY_CHECK],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": launch.pythonpath},  # as the build child's
        check=True,
    )
    last = (done.stdout.strip().splitlines() or [""])[-1]
    return tuple(name for name in last.split(",") if name)
