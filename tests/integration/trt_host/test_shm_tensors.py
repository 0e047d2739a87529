"""Tensors through /dev/shm: exact results, regions reused and replaced, nothing left behind."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from agent.errors import InvalidInputError
from agent.runtimes.host import TrtHost
from agent.runtimes.ort import load_ort
from agent.trt_host import shm
from tests.integration.trt_host.conftest import FAST, regions


def test_a_224_image_through_shared_memory_equals_in_process_onnxruntime_exactly(
    host: TrtHost, models: dict[str, Path]
) -> None:
    model = host.load(models["classifier224"])
    assert [(s.name, s.datatype, s.shape) for s in model.inputs] == [
        ("image", "FP32", (1, 3, 224, 224))
    ]
    reference = load_ort(models["classifier224"])
    rng = np.random.default_rng(3)
    for _ in range(3):
        image = rng.standard_normal((1, 3, 224, 224), dtype=np.float32)
        got = model.infer({"image": image})
        expected = reference.infer({"image": image})
        assert got.keys() == expected.keys() == {"probabilities"}
        assert got["probabilities"].dtype == np.float32
        np.testing.assert_array_equal(got["probabilities"], expected["probabilities"])


def test_regions_are_reused_across_requests_and_replaced_only_when_too_small(
    host: TrtHost, models: dict[str, Path]
) -> None:
    model = host.load(models["batched"])
    prefix = host.shm_prefix
    assert prefix is not None
    reference = load_ort(models["batched"])
    one = np.ones((1, 3, 32, 32), np.float32)
    model.infer({"image": one})
    first = regions(prefix)
    assert len(first) == 2  # one input region (agent), one output region (host)
    for _ in range(5):
        model.infer({"image": one})
    assert regions(prefix) == first
    batch = np.random.default_rng(1).standard_normal((16, 3, 32, 32), dtype=np.float32)
    got = model.infer({"image": batch})  # 196 KB: over the first 64 KiB input region
    np.testing.assert_array_equal(
        got["probabilities"], reference.infer({"image": batch})["probabilities"]
    )
    grown = regions(prefix)
    assert len(grown) == 2
    assert grown != first  # the small input region was replaced, not kept beside the new one


def test_outputs_do_not_change_when_the_next_request_reuses_the_region(
    host: TrtHost, models: dict[str, Path]
) -> None:
    model = host.load(models["classifier"])
    a = model.infer({"image": np.zeros((1, 3, 32, 32), np.float32)})["probabilities"]
    kept = a.copy()
    model.infer({"image": np.ones((1, 3, 32, 32), np.float32)})
    np.testing.assert_array_equal(a, kept)


def test_a_tensor_of_a_dtype_not_served_is_refused_before_it_reaches_the_host(
    host: TrtHost, models: dict[str, Path]
) -> None:
    model = host.load(models["classifier"])
    with pytest.raises(InvalidInputError, match="dtype object"):
        model.infer({"image": np.array([[object()]])})


def test_closing_the_host_leaves_no_region(models: dict[str, Path]) -> None:
    host = TrtHost(FAST).start()
    prefix = host.shm_prefix
    assert prefix is not None
    model = host.load(models["classifier"])
    model.infer({"image": np.ones((1, 3, 32, 32), np.float32)})
    assert regions(prefix)
    host.close()
    assert regions(prefix) == []


def test_regions_of_agents_that_are_gone_are_swept_and_live_ones_kept() -> None:
    dead = shm.Region.create(f"{shm.ROOT}{2**22 + 12345}-x-in-1-1", 4096)  # beyond pid_max
    alive = shm.Region.create(shm.host_prefix(os.getppid(), "sweep") + "in-1-1", 4096)
    try:
        removed = shm.sweep_orphans()
        assert dead.name in removed
        assert alive.name not in removed
        assert os.path.exists(os.path.join(shm.SHM_DIR, alive.name))
    finally:
        for region in (dead, alive):
            region.close()
            region.unlink()


@pytest.mark.parametrize(
    "descriptor",
    [
        {"name": "x", "dtype": "float32", "shape": [1024, 1024], "offset": 0},
        {"name": "x", "dtype": "object", "shape": [1], "offset": 0},
        {"name": "x", "dtype": "float32", "shape": [1], "offset": 3},
        {"name": "x", "dtype": "float32", "shape": [-1], "offset": 0},
        {"name": "x", "dtype": "float32", "shape": [2**32, 2**32], "offset": 0},  # int64 wraps
    ],
)
def test_a_descriptor_outside_its_region_or_of_a_foreign_dtype_is_refused(descriptor) -> None:
    region = shm.Region.create(shm.host_prefix(os.getpid(), "bounds") + "in-1-1", 4096)
    try:
        with pytest.raises(shm.RegionError):
            region.view(descriptor)
    finally:
        region.close()
        region.unlink()
