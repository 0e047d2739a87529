"""Fixtures of the GPU tests (run on a machine with an NVIDIA GPU; they skip elsewhere)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def nvml() -> Iterator[Any]:
    """The real ``pynvml`` with NVML initialised, or a skip naming why it is not usable here."""
    try:
        import pynvml
    except ImportError as exc:
        pytest.skip(f"nvidia-ml-py not importable: {exc}")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        pytest.skip(f"nvmlInit failed: {exc}")
    try:
        if pynvml.nvmlDeviceGetCount() < 1:
            pytest.skip("NVML sees no GPU")
        yield pynvml
    finally:
        pynvml.nvmlShutdown()
