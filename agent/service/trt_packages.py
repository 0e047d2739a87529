"""Which TensorRT Python package each platform line needs: the doctor's install advice, as data.

TensorRT's bindings are built for one Python per JetPack line (shared/data/jetpack_versions.tsv):
JetPack 5.1 ships TensorRT 8.5.2 for Python 3.8, 6.0 ships 8.6.2 and 6.1/6.2 ship 10.3 for 3.10,
7 ships 10.13 for 3.12; on each, ``python3-libnvinfer`` is the package that installs
``import tensorrt`` for that system interpreter. On x86 with a dGPU, NVIDIA's PyPI wheels go into
the interpreter the host runs under (``tensorrt-cu<CUDA major>``), or the distribution's
``python3-libnvinfer`` from NVIDIA's CUDA apt repository. Pins are the newest release per CUDA
major that :mod:`agent.trt_host.versions` supports (checked against PyPI's index: tensorrt-cu11
ends at 10.13.0.35; tensorrt-cu12 and -cu13 have 11.1.0.106).

Pure: :func:`line_for` picks the row from the device's JetPack (or arch), :func:`install_advice`
words the fix. Adding a JetPack line is one row.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TrtLine:
    """One platform line: where its TensorRT comes from and for which Python."""

    name: str
    jetpack_prefixes: tuple[str, ...]  # JetPack versions of this line ("6.1" matches 6.1.x)
    python: str  # the Python its TensorRT bindings are built for
    interpreter: str  # that Python's path (the ``tensorrt_python`` setting, if it is not found)
    tensorrt: str  # the release the line ships
    package: str  # the exact install command


JETPACK_LINES: tuple[TrtLine, ...] = (
    TrtLine(
        "JetPack 5.1", ("5.1",), "3.8", "/usr/bin/python3.8", "8.5.2",
        "sudo apt install python3-libnvinfer",
    ),
    TrtLine(
        "JetPack 6.0", ("6.0",), "3.10", "/usr/bin/python3.10", "8.6.2",
        "sudo apt install python3-libnvinfer",
    ),
    TrtLine(
        "JetPack 6.1/6.2", ("6.1", "6.2"), "3.10", "/usr/bin/python3.10", "10.3",
        "sudo apt install python3-libnvinfer",
    ),
    TrtLine(
        "JetPack 7", ("7.",), "3.12", "/usr/bin/python3.12", "10.13",
        "sudo apt install python3-libnvinfer",
    ),
)  # fmt: skip

X86_PINS = {11: "tensorrt-cu11==10.13.0.35", 12: "tensorrt-cu12==11.1.0.106"}
"""CUDA major → the pip requirement to install (13 and later: ``tensorrt-cu13==11.1.0.106``)."""
X86_NEWER = "tensorrt-cu{major}==11.1.0.106"


def _matches(jetpack: str, prefix: str) -> bool:
    return jetpack == prefix.rstrip(".") or jetpack.startswith(
        prefix if prefix.endswith(".") else prefix + "."
    )


def line_for(jetpack: str | None) -> TrtLine | None:
    """The JetPack line of ``jetpack`` (e.g. ``"5.1.2"`` → JetPack 5.1); None off a Jetson or
    for a JetPack no row covers."""
    if not jetpack:
        return None
    return next(
        (
            line
            for line in JETPACK_LINES
            if any(_matches(jetpack, p) for p in line.jetpack_prefixes)
        ),
        None,
    )


def pip_requirement(cuda_major: int | None) -> str:
    """The x86 wheel for this CUDA major (12 when it is not known)."""
    major = cuda_major or 12
    return X86_PINS.get(major) or X86_NEWER.format(major=major)


def install_advice(
    jetpack: str | None, interpreter: str | None, cuda_version: str | None, own: bool = False
) -> str:
    """The exact fix for a missing or unsupported TensorRT on this device; ``interpreter``: where
    pip should install on x86 (``own``: it is the agent's, found without a setting)."""
    line = line_for(jetpack)
    if line is not None:
        return (
            f"{line.package} (on {line.name}: TensorRT {line.tensorrt} for Python {line.python}, "
            f"{line.interpreter}); or set runtime = onnxruntime"
        )
    if jetpack:
        return (
            f"JetPack {jetpack} is not in Jetfleet's table: install its python3-libnvinfer and "
            "set tensorrt_python to the Python it is built for; or set runtime = onnxruntime"
        )
    major = int(cuda_version.split(".", 1)[0]) if cuda_version else None
    python = interpreter or "/usr/bin/python3"
    return (
        f"{python} -m pip install {pip_requirement(major)}"
        + ("" if own else f" and set tensorrt_python = {python}")
        + ", or the distribution's python3-libnvinfer from NVIDIA's CUDA repository; or set "
        "runtime = onnxruntime"
    )
