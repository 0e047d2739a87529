"""Which interpreter can ``import tensorrt``: the one the TensorRT host runs under.

TensorRT's Python bindings come with JetPack for JetPack's own Python (3.8 on JetPack 5.1, 3.10
on 6.x, 3.12 on 7), never for the agent's. So the agent never imports TensorRT: it asks
candidate interpreters, each by running ``<python> -m agent.trt_host.probe`` (a real child, with
a timeout) from a directory holding only ``agent/trt_host``
(:func:`agent.trt_host.launch.isolated_root`), and reads its JSON answer.

Candidates, in order (:func:`candidates`):

- the ``tensorrt_python`` setting, when set: then it is the **only** one asked. An operator who
  names an interpreter means that TensorRT; silently building with another release would make
  engines for a version they did not choose. A missing or failing path is the reason, verbatim.
- JetPack's system interpreters: ``/usr/bin/python3``, then ``python3.8`` (JetPack 5.1),
  ``python3.10`` (6.x), ``python3.12`` (7), then the other 3.x (a path is asked once, by its
  real file);
- the agent's own ``sys.executable`` last (x86 + dGPU with ``pip install tensorrt-cu12``).

The first that imports a TensorRT release :mod:`agent.trt_host.versions` supports wins. When
none does, the answer describes the best one seen (an unsupported release beats "not
importable") and ``reason`` says, per interpreter, why not. :func:`find_tensorrt_python` caches
its answer per process and setting (one probe per agent start; a TensorRT install needs a
restart, as any library does). Thread safety: the cache is ``functools.lru_cache``; two threads
asking at once may both probe, and both get an equal answer.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from agent.trt_host import launch
from agent.trt_host.probe import MARKER

PROBE_MODULE = "agent.trt_host.probe"
PROBE_TIMEOUT_S = 60.0
"""Importing TensorRT and creating a runtime takes seconds on a Jetson (CUDA initialises)."""

JETPACK_PYTHONS = (
    "/usr/bin/python3",
    "/usr/bin/python3.8",  # JetPack 5.1
    "/usr/bin/python3.10",  # JetPack 6.x
    "/usr/bin/python3.12",  # JetPack 7
    "/usr/bin/python3.9",
    "/usr/bin/python3.11",
    "/usr/bin/python3.13",
    "/usr/bin/python3.14",
)


@dataclass(frozen=True)
class TrtPython:
    """The interpreter the TensorRT host runs under, and what it reported.

    ``interpreter`` is set only when it imports a supported TensorRT (``reason`` is then None).
    Otherwise ``reason`` says why not, and the version fields describe the best candidate seen
    (e.g. a TensorRT release outside 8.5 to the newest), so the doctor can show it.
    """

    interpreter: str | None
    python_version: str | None
    tensorrt_version: str | None
    cuda_runtime_version: str | None
    cuda_driver_version: str | None
    dla_cores: int | None
    reason: str | None
    runtime_created: bool = False
    """A TensorRT runtime could be created there (which needs a CUDA device)."""
    candidate: str | None = None
    """The interpreter the version fields describe (set also when it cannot serve)."""
    cuda_devices: int | None = None
    """CUDA devices libcudart sees there (the host's own CUDA layer); None when it failed."""
    cuda_error: str | None = None
    """Why libcudart saw no device there (missing library, no driver...)."""

    @property
    def usable(self) -> bool:
        return self.interpreter is not None and self.reason is None


def candidates(configured: str | None, own: str | None = None) -> list[str]:
    """Interpreters to ask, in order (see the module docstring); missing system paths skipped."""
    if configured:
        return [configured]
    found: list[str] = []
    seen: set[str] = set()
    for path in JETPACK_PYTHONS:
        real = os.path.realpath(path)
        if os.path.isfile(real) and os.access(real, os.X_OK) and real not in seen:
            seen.add(real)
            found.append(path)
    own = own if own is not None else sys.executable
    if own and os.path.abspath(own) not in {os.path.abspath(p) for p in found}:
        found.append(own)  # a venv's python links to a system one but has its own packages
    return found


def ask(interpreter: str, timeout_s: float = PROBE_TIMEOUT_S) -> dict[str, Any]:
    """Run the probe child under ``interpreter``; its answer, or ``{"error": why}``."""
    if not os.path.isfile(interpreter):
        return {"error": "no such file"}
    if not os.access(interpreter, os.X_OK):
        return {"error": "not executable"}
    root = launch.isolated_root(prefix="jetfleet-trt-probe-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(root)
    try:
        done = subprocess.run(
            [interpreter, "-m", PROBE_MODULE],
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"no answer within {timeout_s:.0f} s"}
    except OSError as exc:
        return {"error": f"cannot run it: {exc.strerror or exc}"}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for line in done.stdout.splitlines():
        if line.startswith(MARKER):
            try:
                answer: dict[str, Any] = json.loads(line[len(MARKER) :])
            except ValueError:
                break
            return answer
    how = (
        f"killed by signal {-done.returncode}"
        if done.returncode < 0
        else f"exit status {done.returncode}"
    )
    tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
    return {"error": f"the probe failed ({how}): {tail[0]}"}


def _why_not(answer: dict[str, Any]) -> str:
    if "error" in answer:
        return str(answer["error"])
    if answer.get("tensorrt_version") is None:
        return (
            f"Python {answer.get('python')}: cannot import tensorrt ({answer.get('import_error')})"
        )
    return f"Python {answer.get('python')}: {answer.get('unsupported_reason')}"


def _rank(answer: dict[str, Any]) -> int:
    """How much an answer that cannot serve still tells: a release seen > a Python seen > none."""
    if answer.get("tensorrt_version"):
        return 2
    return 1 if answer.get("python") else 0


def _describe(interpreter: str | None, answer: dict[str, Any], reason: str | None) -> TrtPython:
    return TrtPython(
        interpreter=interpreter,
        python_version=answer.get("python"),
        tensorrt_version=answer.get("tensorrt_version"),
        cuda_runtime_version=answer.get("cuda_runtime_version"),
        cuda_driver_version=answer.get("cuda_driver_version"),
        dla_cores=answer.get("dla_cores"),
        reason=reason,
        runtime_created=bool(answer.get("runtime_created")),
        candidate=(answer.get("executable") or interpreter) if answer else None,
        cuda_devices=answer.get("cuda_devices"),
        cuda_error=answer.get("cuda_error"),
    )


def discover(
    configured: str | None,
    tried: list[str] | None = None,
    timeout_s: float = PROBE_TIMEOUT_S,
) -> TrtPython:
    """Ask ``tried`` (default: :func:`candidates`) in order; uncached (tests call this)."""
    paths = tried if tried is not None else candidates(configured)
    why: list[tuple[str, str]] = []
    best: tuple[int, str, dict[str, Any]] | None = None
    for path in paths:
        answer = ask(path, timeout_s)
        if answer.get("supported"):
            return _describe(path, answer, None)
        why.append((path, _why_not(answer)))
        if best is None or _rank(answer) > best[0]:
            best = (_rank(answer), path, answer)
    if configured and len(why) == 1:
        reason = f"tensorrt_python = {configured}: {why[0][1]}"
    else:
        head = "no interpreter imports a supported TensorRT" if paths else "no Python found"
        reason = "; ".join([head, *(f"{path}: {text}" for path, text in why)])
    if best is None:
        return _describe(None, {}, reason)
    return _describe(None, {**best[2], "executable": best[1]}, reason)


@lru_cache(maxsize=8)
def find_tensorrt_python(configured: str | None) -> TrtPython:
    """The interpreter the TensorRT host runs under (cached per process and setting)."""
    return discover(configured)
