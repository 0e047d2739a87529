"""The ONNX Runtime "build": the graph optimised at the config's level and saved to disk.

Runs in a child process (``python -m agent.engines.builder_ort REQUEST.json``, see
:mod:`agent.engines.build_runner`). ``SessionOptions.optimized_model_filepath`` makes the session
write the optimised model, which the agent then loads as the engine. ONNX Runtime reports no
progress while it optimises, so the progress lines mark the real stages (load, optimise, saved).
"""

from __future__ import annotations

import sys

import onnxruntime as ort

from agent.engines.build_protocol import BuilderError, BuildRequest, Progress, child_main

LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


def build(request: BuildRequest, progress: Progress) -> None:
    """Optimise ``request.onnx_path`` and save it to ``request.output_path``."""
    options = request.config.onnxruntime
    available = set(ort.get_available_providers())
    providers = [p for p in options.providers if p in available]
    if not providers:
        raise BuilderError(
            [
                f"none of the configured providers {list(options.providers)} is available "
                f"(available: {sorted(available)}): add CPUExecutionProvider to the config"
            ]
        )
    progress(5, f"optimising at level {options.graph_optimization_level} for {providers[0]}")
    session_options = ort.SessionOptions()
    session_options.graph_optimization_level = LEVELS[options.graph_optimization_level]
    session_options.optimized_model_filepath = str(request.output_path)
    session_options.log_severity_level = 3
    try:
        ort.InferenceSession(
            str(request.onnx_path), sess_options=session_options, providers=providers
        )
    except Exception as exc:
        raise BuilderError([line for line in str(exc).splitlines() if line.strip()]) from exc
    if not request.output_path.is_file():
        raise BuilderError([f"onnxruntime did not write {request.output_path}"])
    progress(100, "optimised model saved")


if __name__ == "__main__":
    sys.exit(child_main(build, sys.argv))
