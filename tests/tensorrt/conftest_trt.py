"""The skip every ``tensorrt`` test shares: TensorRT runs under the TensorRT interpreter, never in
the agent, so "TensorRT is here" means that interpreter imports it and sees a CUDA device."""

from __future__ import annotations

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
