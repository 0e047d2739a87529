"""A builder child that records what it was asked to build (for the calibration-inputs test).

Its "engine" is JSON: the TensorRT host's build options for the request
(:func:`agent.engines.trt_config.host_build_request`) and the arrays of the sample-inputs NPZ the
request names, read back from that file (name → shape), so a test can see both from the cache.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from agent.engines.build_protocol import BuildRequest, Progress, child_main
from agent.engines.trt_config import host_build_request


def build(request: BuildRequest, progress: Progress) -> None:
    samples: dict[str, list[int]] = {}
    if request.calibration_inputs_path is not None:
        with np.load(request.calibration_inputs_path, allow_pickle=False) as loaded:
            samples = {key: list(loaded[key].shape) for key in loaded.files}
    record = {"options": host_build_request(request)["options"], "samples": samples}
    request.output_path.write_text(json.dumps(record))
    progress(100, "recorded")


if __name__ == "__main__":
    sys.exit(child_main(build, sys.argv))
