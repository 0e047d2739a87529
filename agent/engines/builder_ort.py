"""The ONNX Runtime "build": the graph optimised at the config's level and saved to disk.

Runs in a child process (``python -m agent.engines.builder_ort REQUEST.json``, see
:mod:`agent.engines.build_runner`). ``SessionOptions.optimized_model_filepath`` makes the session
write the optimised model, which the agent then loads as the engine. ONNX Runtime reports no
progress while it optimises, so the progress lines mark the real stages (load, optimise, saved).

The saved model keeps the original model's interface: ONNX Runtime can leave ``graph.input``
entries of IR-3 initializers it folded away, which would make them required inputs of the engine
(:mod:`agent.engines.onnx_interface`). Those entries are dropped, and the saved model's inputs
and outputs are checked against what ONNX Runtime lists for the original model; a mismatch fails
the build rather than giving the agent an engine no client or reference can feed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import onnxruntime as ort

from agent.engines.build_protocol import BuilderError, BuildRequest, Progress, child_main
from agent.engines.onnx_interface import WireError, interface, keep_inputs

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
        session = ort.InferenceSession(
            str(request.onnx_path), sess_options=session_options, providers=providers
        )
    except Exception as exc:
        raise BuilderError([line for line in str(exc).splitlines() if line.strip()]) from exc
    if not request.output_path.is_file():
        raise BuilderError([f"onnxruntime did not write {request.output_path}"])
    inputs = [arg.name for arg in session.get_inputs()]
    outputs = [arg.name for arg in session.get_outputs()]
    del session
    keep_interface(request.output_path, inputs, outputs)
    progress(100, "optimised model saved")


def keep_interface(path: Path, inputs: list[str], outputs: list[str]) -> None:
    """Make the saved model at ``path`` take exactly ``inputs`` and give ``outputs`` (what ONNX
    Runtime lists for the original model); BuilderError when it cannot."""
    saved = path.read_bytes()
    try:
        fixed, dropped = keep_inputs(saved, inputs)
        got_inputs, got_outputs = interface(fixed)
    except WireError as exc:
        raise BuilderError([f"cannot read the optimised model onnxruntime saved: {exc}"]) from exc
    problems = []
    if sorted(got_inputs) != sorted(inputs):
        problems.append(f"the optimised model takes {got_inputs}, the model takes {inputs}")
    if sorted(got_outputs) != sorted(outputs):
        problems.append(f"the optimised model gives {got_outputs}, the model gives {outputs}")
    if problems:
        raise BuilderError([*problems, "build with graph_optimization_level 'disable'"])
    if dropped:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(fixed)
        os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(child_main(build, sys.argv))
