"""Run one builder in a child process: timeout, peak memory, progress, the builder's own errors.

A TensorRT build can take many minutes and gigabytes, and a crash inside the builder must not
take the agent (and the models it serves) down with it. So every build runs as
``python -m <builder module> REQUEST.json`` in its own session: progress lines on its stdout
become ``on_progress`` calls, its stderr is kept as the failure's error lines, its resident
memory (with its children) is sampled for the peak, and on timeout or cancellation the whole
process group is killed.

TensorRT builds run as ``<tensorrt python> -m agent.trt_host.build_child REQUEST.json`` (the
runtime descriptor's builder, :data:`agent.engines.trt_interpreter.HOST_BUILDER`): the agent never
imports TensorRT, the request is the plain JSON of :func:`agent.engines.trt_config.
host_build_request`, and progress and error lines are the same as every builder's.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psutil

from agent.engines.build_protocol import BuildRequest, parse_progress
from agent.engines.onnx_rewrite import prepared_onnx
from agent.engines.trt_config import TrtConfigError, host_build_request
from agent.engines.trt_interpreter import HOST_BUILDER, tensorrt_launch
from agent.errors import ModelLoadError, PermanentError
from agent.hardware.runtime_kinds import RUNTIMES

log = logging.getLogger(__name__)

BUILDERS = {name: kind.builder for name, kind in RUNTIMES.items()}
"""Runtime → the module a build runs as (the descriptors' ``builder``; tests swap in others)."""

POLL_S = 0.1
ERROR_LINES = 40


class BuildFailed(PermanentError):
    """The builder failed, timed out or was cancelled; ``lines`` are its own error lines."""

    def __init__(self, summary: str, lines: list[str]) -> None:
        detail = f": {lines[-1]}" if lines else ""
        super().__init__(f"{summary}{detail}")
        self.summary = summary
        self.lines = lines


@dataclass(frozen=True)
class BuildOutcome:
    """A finished build: its engine file, how long it took, the child's peak memory."""

    output: Path
    seconds: float
    peak_rss_bytes: int


def _rss(process: psutil.Process) -> int:
    try:
        total = int(process.memory_info().rss)
        for child in process.children(recursive=True):
            try:
                total += int(child.memory_info().rss)
            except psutil.Error:
                continue
    except psutil.Error:
        return 0
    return total


def exit_summary(module: str, returncode: int) -> str:
    """How a failed builder ended: ``exited N``, or ``was killed by SIGSEGV (signal 11)`` (its
    own words of a crash inside TensorRT's builder)."""
    if returncode >= 0:
        return f"{module} exited {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = "an unknown signal"
    return f"{module} was killed by {name} (signal {-returncode})"


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    except PermissionError:
        proc.kill()


def run_build(
    module: str,
    request: BuildRequest,
    timeout_s: float,
    on_progress: Callable[[float, str], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> BuildOutcome:
    """Build ``request`` with builder ``module`` in a child; BuildFailed with its error lines."""
    request.output_path.parent.mkdir(parents=True, exist_ok=True)
    request.output_path.unlink(missing_ok=True)
    request_file = request.output_path.with_name(request.output_path.name + ".request.json")
    interpreter, env, cwd = sys.executable, None, None
    prepared: Path | None = None  # the model rewritten for TensorRT (onnx_rewrite), if it was
    if module == HOST_BUILDER:
        try:
            payload = json.dumps(host_build_request(request))
            launch = tensorrt_launch(for_build=True)
        except (TrtConfigError, ModelLoadError) as exc:
            raise BuildFailed("TensorRT build refused", [str(exc)]) from exc
        interpreter, env = launch.interpreter, {**os.environ, "PYTHONPATH": launch.pythonpath}
        cwd = launch.pythonpath  # ``-m`` puts the working directory first on the child's path
        source = prepared_onnx(request, on_progress)
        if source != request.onnx_path:
            prepared, request = source, request.model_copy(update={"onnx_path": source})
            payload = json.dumps(host_build_request(request))
    else:
        payload = request.model_dump_json()
    request_file.write_text(payload)
    errors: deque[str] = deque(maxlen=ERROR_LINES)
    started = time.monotonic()
    proc = subprocess.Popen(
        [interpreter, "-m", module, str(request_file)],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        errors="replace",
        start_new_session=True,
    )

    def read_stdout(stream: IO[str]) -> None:
        for line in stream:
            parsed = parse_progress(line.rstrip("\n"))
            if parsed is None:
                log.debug("builder: %s", line.rstrip())
            elif on_progress is not None:
                on_progress(*parsed)

    def read_stderr(stream: IO[str]) -> None:
        for line in stream:
            if line.strip():
                errors.append(line.rstrip())

    readers = [
        threading.Thread(target=read_stdout, args=(proc.stdout,), daemon=True),
        threading.Thread(target=read_stderr, args=(proc.stderr,), daemon=True),
    ]
    for reader in readers:
        reader.start()
    watched = psutil.Process(proc.pid)
    peak = 0
    stopped: str | None = None
    try:
        while proc.poll() is None:
            peak = max(peak, _rss(watched))
            if time.monotonic() - started > timeout_s:
                stopped = f"build timed out after {timeout_s:g} s and was killed"
            elif cancelled is not None and cancelled():
                stopped = "build cancelled: the agent is stopping"
            if stopped:
                _kill_group(proc)
                proc.wait()
                break
            try:
                proc.wait(POLL_S)
            except subprocess.TimeoutExpired:
                continue
    finally:
        if proc.poll() is None:
            _kill_group(proc)
            proc.wait()
        for reader in readers:
            reader.join(5)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        request_file.unlink(missing_ok=True)
        if prepared is not None:
            prepared.unlink(missing_ok=True)
    seconds = time.monotonic() - started
    if stopped is not None:
        request.output_path.unlink(missing_ok=True)
        raise BuildFailed(stopped, list(errors))
    if proc.returncode != 0:
        request.output_path.unlink(missing_ok=True)
        raise BuildFailed(exit_summary(module, proc.returncode), list(errors))
    if not request.output_path.is_file():
        raise BuildFailed(f"{module} exited 0 without writing the engine", list(errors))
    return BuildOutcome(output=request.output_path, seconds=seconds, peak_rss_bytes=peak)
