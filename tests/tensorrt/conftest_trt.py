"""The skip every ``tensorrt`` test shares: TensorRT runs under the TensorRT interpreter, never in
the agent, so "TensorRT is here" means that interpreter imports it and sees a CUDA device."""

from __future__ import annotations

import subprocess

import pytest

CHECK = (
    "import tensorrt as t; from agent.trt_host.cudart import CudaRuntime; "
    "CudaRuntime().device_count(); print(t.__version__)"
)


def tensorrt_here() -> str | None:
    """Why TensorRT cannot run here, or None when it can."""
    from agent.engines.trt_interpreter import tensorrt_launch

    try:
        launch = tensorrt_launch(for_build=True)
    except Exception as exc:
        return f"no TensorRT interpreter: {exc}"
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
        return f"{launch.interpreter} cannot run TensorRT with a CUDA device: {last}"
    return None


def skip_without_tensorrt() -> None:
    reason = tensorrt_here()
    if reason is not None:
        pytest.skip(reason, allow_module_level=True)


def tensorrt_version() -> str:
    """The version of TensorRT the TensorRT interpreter imports (call after the skip)."""
    from agent.engines.trt_interpreter import tensorrt_launch

    launch = tensorrt_launch(for_build=True)
    done = subprocess.run(
        [launch.interpreter, "-c", "import tensorrt; print(tensorrt.__version__)"],
        capture_output=True,
        text=True,
        cwd=launch.pythonpath,
        env={"PYTHONPATH": launch.pythonpath, "PATH": "/usr/bin:/bin"},
        check=True,
    )
    return done.stdout.strip()
