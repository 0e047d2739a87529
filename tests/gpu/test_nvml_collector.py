"""The NVML collector against a real NVIDIA GPU: its readings agree with NVML's own answers, and
its nvmlInit/nvmlShutdown are paired across samples. Skipped, with the reason, where
nvidia-ml-py is not importable or NVML answers no GPU (tests/gpu/conftest.py). The unit tests
(tests/unit/agent/telemetry/test_nvml_collector.py) cover the readings' use on plain values.

Set ``JETFLEET_NVML_RECORD=<file>`` to keep the readings as JSON (for bench/results/).
Imports only the collector, which needs nvidia-ml-py but not the agent's other dependencies.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agent.telemetry.collectors.nvml_collector import NvmlCollector

pytestmark = pytest.mark.gpu


def test_every_gpu_is_reported_with_nvmls_identity_and_memory(nvml: Any) -> None:
    collector = NvmlCollector()
    try:
        readings = collector.collect()
    finally:
        collector.close()
    assert readings.available, readings.reason
    assert len(readings.gpus) == nvml.nvmlDeviceGetCount()
    for gpu in readings.gpus:
        handle = nvml.nvmlDeviceGetHandleByIndex(gpu.index)
        assert gpu.name == nvml.nvmlDeviceGetName(handle)
        assert gpu.uuid == nvml.nvmlDeviceGetUUID(handle)
        assert gpu.memory_total_bytes == nvml.nvmlDeviceGetMemoryInfo(handle).total
        assert gpu.memory_used_bytes is not None
        assert 0 <= gpu.memory_used_bytes <= gpu.memory_total_bytes
        assert gpu.utilization_percent is not None
        assert 0 <= gpu.utilization_percent <= 100
        assert gpu.temperature_c is not None
        assert 0 < gpu.temperature_c < 110
        assert gpu.sm_clock_mhz is not None
        assert gpu.sm_clock_mhz > 0
        if gpu.power_draw_mw is not None:
            limit = nvml.nvmlDeviceGetEnforcedPowerLimit(handle)
            assert 0 < gpu.power_draw_mw <= limit * 1.5
    record = os.environ.get("JETFLEET_NVML_RECORD")
    if record:
        Path(record).write_text(
            json.dumps(
                {
                    "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "driver": nvml.nvmlSystemGetDriverVersion(),
                    "readings": dataclasses.asdict(readings),
                },
                indent=2,
            )
            + "\n"
        )


def test_repeated_samples_keep_nvml_usable_for_others(nvml: Any) -> None:
    collector = NvmlCollector()
    for _ in range(3):
        assert collector.collect().available
    collector.close()
    assert nvml.nvmlDeviceGetCount() >= 1, "close() must undo only its own nvmlInit"


PAIRED = """
import pynvml
from agent.telemetry.collectors.nvml_collector import NvmlCollector
collector = NvmlCollector()
for _ in range(3):
    assert collector.collect().available
collector.close()
collector.close()
try:
    pynvml.nvmlDeviceGetCount()
except pynvml.NVMLError_Uninitialized:
    print("uninitialised")
else:
    print("still initialised")
"""


def test_one_init_for_many_samples_and_one_shutdown_on_close(nvml: Any) -> None:
    """In a process of its own (this one holds the fixture's nvmlInit): three samples, two
    closes, and NVML is uninitialised again: one nvmlInit for the samples, one nvmlShutdown."""
    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-c", PAIRED],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "uninitialised"
