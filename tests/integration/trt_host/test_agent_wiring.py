"""The agent's TensorRT runtime goes through TensorRT hosts: loading, swap modes, refit/profile.

TensorRT cannot run here, so the hosts serve with their CPU backend through the documented
test-only switch ``JETFLEET_TEST_TRT_HOST_BACKEND=onnxruntime`` (agent/engines/trt_interpreter.py):
everything else is the agent's real TensorRT path (runtime table, swap-mode loaders, host
processes, /dev/shm tensors).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from agent.engines.trt_interpreter import ENV_TEST_BACKEND
from agent.errors import ModelLoadError
from agent.runtimes import trt_hosts
from agent.runtimes.loading import load_engine
from agent.runtimes.ort import load_ort
from agent.swap.loaders import loader_for

IMAGE = np.ones((1, 3, 32, 32), np.float32)


@pytest.fixture
def cpu_hosts(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(ENV_TEST_BACKEND, "onnxruntime")
    yield
    if trt_hosts._shared is not None:
        trt_hosts._shared.close()
        trt_hosts._shared = None


def expected(path: Path) -> dict[str, np.ndarray]:
    model = load_ort(path)
    try:
        return model.infer({"image": IMAGE})
    finally:
        model.close()


def test_in_process_tensorrt_models_share_one_host(cpu_hosts, models: dict[str, Path]) -> None:
    first = load_engine("tensorrt", models["classifier"])
    second = loader_for("tensorrt", "in_process")(models["classifier"])
    assert isinstance(first, trt_hosts.TrtHostModel)
    assert isinstance(second, trt_hosts.TrtHostModel)
    assert first.host is second.host
    assert first.host.pid != os.getpid()
    assert first.host.hello["backend"] == "onnxruntime"
    out = first.infer({"image": IMAGE})
    for name, value in expected(models["classifier"]).items():
        np.testing.assert_allclose(out[name], value, rtol=1e-5)
    first.close()
    assert second.infer({"image": IMAGE}).keys() == out.keys()  # the host keeps serving
    second.close()


def test_worker_mode_gives_each_tensorrt_model_its_own_host_gone_with_it(
    cpu_hosts, models: dict[str, Path]
) -> None:
    load = loader_for("tensorrt", "worker_process")
    a, b = load(models["classifier"]), load(models["classifier"])
    assert isinstance(a, trt_hosts.TrtHostModel)
    pid = a.host.pid
    assert pid is not None
    assert pid != b.host.pid
    a.infer({"image": IMAGE})
    a.close()
    assert not os.path.exists(f"/proc/{pid}") or "zombie" in Path(f"/proc/{pid}/status").read_text()
    b.infer({"image": IMAGE})
    b.close()


def test_refit_and_profile_say_the_cpu_backend_cannot(cpu_hosts, models: dict[str, Path]) -> None:
    model = load_engine("tensorrt", models["classifier"])
    assert model.refittable is False
    with pytest.raises(ModelLoadError, match="backend of this host cannot refit"):
        model.refit_from_onnx(models["classifier"])
    with pytest.raises(Exception, match="cannot profile"):
        model.profile_layers({"image": IMAGE}, runs=1, warmups=0)
    assert model.infer({"image": IMAGE})  # still serving
    model.close()
