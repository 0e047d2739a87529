"""A small ctypes binding of the CUDA runtime (libcudart): the handful of calls the host needs.

Why ctypes and not cuda-python: the host must run on every JetPack with nothing extra to install.
libcudart ships with every JetPack and every CUDA install, and its C ABI for these calls has not
changed since CUDA 10. cuda-python, in contrast, is neither on JetPack nor stable: its
``cudaMemcpyAsync`` rejects the copy direction as a plain int (AttributeError) on cuda-python
11.8.3 and 12.6.0 and cuda-bindings 12.8.0, 12.9.0-12.9.5 and 13.0.0-13.0.3, and a
13.x wheel does not load on a CUDA 12 JetPack. NVIDIA's Polygraphy does exactly this
(``polygraphy/cuda/cuda.py``: ctypes over libcudart, found with ctypes.util plus common paths).

Copy directions are named ``ctypes.c_int`` constants (:data:`MEMCPY_HOST_TO_DEVICE`, ...), the
values of the C enum ``cudaMemcpyKind``; every call's argument and return types are declared.
A missing library or driver is one :class:`CudaUnavailable` naming what is missing; a failing
call is a :class:`CudaError` with CUDA's own error name and string.

Thread safety: libcudart is thread-safe; a :class:`CudaRuntime` holds no mutable state.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
from typing import List, Optional, Tuple

# enum cudaMemcpyKind (driver_types.h)
MEMCPY_HOST_TO_HOST = ctypes.c_int(0)
MEMCPY_HOST_TO_DEVICE = ctypes.c_int(1)
MEMCPY_DEVICE_TO_HOST = ctypes.c_int(2)
MEMCPY_DEVICE_TO_DEVICE = ctypes.c_int(3)
MEMCPY_DEFAULT = ctypes.c_int(4)

SEARCH_DIRS = (
    "/usr/local/cuda/lib64",
    "/usr/local/cuda/targets/aarch64-linux/lib",  # JetPack (Orin, Xavier)
    "/usr/local/cuda/targets/sbsa-linux/lib",  # JetPack 7 on Thor (SBSA)
    "/usr/local/cuda/targets/x86_64-linux/lib",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
)
SONAMES = ("libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0")


class CudaUnavailable(RuntimeError):
    """No CUDA runtime library, driver or device; the message names what is missing."""


class CudaError(RuntimeError):
    """A CUDA runtime call answered an error code."""


def candidates() -> List[str]:
    """Where libcudart may be, in the order tried (ctypes.util first, as Polygraphy does)."""
    found: List[str] = []
    name = ctypes.util.find_library("cudart")
    if name:
        found.append(name)
    found.extend(SONAMES)
    roots = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if cuda_home:
        roots.append(os.path.join(cuda_home, "lib64"))
    roots.extend(SEARCH_DIRS)
    roots.extend(sorted(glob.glob("/usr/local/cuda-*/lib64"), reverse=True))
    for root in roots:
        found.extend(sorted(glob.glob(os.path.join(root, "libcudart.so*")), reverse=True))
    return found


def _load() -> ctypes.CDLL:
    errors: List[str] = []
    for path in candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as exc:
            errors.append(str(exc))
    raise CudaUnavailable(
        "CUDA unavailable: libcudart not found (tried ctypes.util, LD_LIBRARY_PATH, CUDA_HOME and "
        "/usr/local/cuda*): install the CUDA runtime of this JetPack (cuda-cudart) or set "
        "LD_LIBRARY_PATH"
    )


def _declare(lib: ctypes.CDLL) -> None:
    c_void_p, c_size_t, c_int = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
    table = {
        "cudaGetDeviceCount": [ctypes.POINTER(c_int)],
        "cudaRuntimeGetVersion": [ctypes.POINTER(c_int)],
        "cudaDriverGetVersion": [ctypes.POINTER(c_int)],
        "cudaSetDevice": [c_int],
        "cudaMalloc": [ctypes.POINTER(c_void_p), c_size_t],
        "cudaFree": [c_void_p],
        "cudaMemcpy": [c_void_p, c_void_p, c_size_t, c_int],
        "cudaMemcpyAsync": [c_void_p, c_void_p, c_size_t, c_int, c_void_p],
        "cudaStreamCreate": [ctypes.POINTER(c_void_p)],
        "cudaStreamSynchronize": [c_void_p],
        "cudaStreamDestroy": [c_void_p],
        "cudaMemGetInfo": [ctypes.POINTER(c_size_t), ctypes.POINTER(c_size_t)],
    }
    for name, argtypes in table.items():
        function = getattr(lib, name)
        function.argtypes = argtypes
        function.restype = c_int
    for name in ("cudaGetErrorName", "cudaGetErrorString"):
        function = getattr(lib, name)
        function.argtypes = [c_int]
        function.restype = ctypes.c_char_p


class CudaRuntime:
    """libcudart through ctypes; device pointers and streams are plain ints."""

    def __init__(self, lib: Optional[ctypes.CDLL] = None) -> None:
        self._lib = lib if lib is not None else _load()
        _declare(self._lib)

    def error_string(self, code: int) -> str:
        name = self._lib.cudaGetErrorName(code) or b"cudaError"
        text = self._lib.cudaGetErrorString(code) or b""
        return "%s (%d): %s" % (name.decode(), code, text.decode())

    def _check(self, function: str, code: int) -> None:
        if code != 0:
            raise CudaError("%s failed: %s" % (function, self.error_string(code)))

    def device_count(self) -> int:
        """Devices visible; CudaUnavailable with CUDA's reason when none (e.g. no driver)."""
        count = ctypes.c_int(0)
        code = self._lib.cudaGetDeviceCount(ctypes.byref(count))
        if code != 0:
            raise CudaUnavailable("CUDA unavailable: " + self.error_string(code))
        if count.value < 1:
            raise CudaUnavailable("CUDA unavailable: no CUDA device is visible")
        return count.value

    def runtime_version(self) -> int:
        value = ctypes.c_int(0)
        self._check("cudaRuntimeGetVersion", self._lib.cudaRuntimeGetVersion(ctypes.byref(value)))
        return value.value

    def driver_version(self) -> int:
        """0 when no driver is installed."""
        value = ctypes.c_int(0)
        self._check("cudaDriverGetVersion", self._lib.cudaDriverGetVersion(ctypes.byref(value)))
        return value.value

    def set_device(self, index: int) -> None:
        self._check("cudaSetDevice", self._lib.cudaSetDevice(index))

    def malloc(self, nbytes: int) -> int:
        """Device memory (256-byte aligned, as TensorRT requires); the pointer as an int."""
        ptr = ctypes.c_void_p()
        self._check("cudaMalloc", self._lib.cudaMalloc(ctypes.byref(ptr), max(int(nbytes), 1)))
        return int(ptr.value or 0)

    def free(self, ptr: int) -> None:
        self._check("cudaFree", self._lib.cudaFree(ptr))

    def memcpy(self, dst: int, src: int, nbytes: int, kind: ctypes.c_int) -> None:
        self._check("cudaMemcpy", self._lib.cudaMemcpy(dst, src, nbytes, kind))

    def memcpy_async(
        self, dst: int, src: int, nbytes: int, kind: ctypes.c_int, stream: int
    ) -> None:
        code = self._lib.cudaMemcpyAsync(dst, src, nbytes, kind, stream)
        self._check("cudaMemcpyAsync", code)

    def stream_create(self) -> int:
        stream = ctypes.c_void_p()
        self._check("cudaStreamCreate", self._lib.cudaStreamCreate(ctypes.byref(stream)))
        return int(stream.value or 0)

    def stream_synchronize(self, stream: int) -> None:
        self._check("cudaStreamSynchronize", self._lib.cudaStreamSynchronize(stream))

    def stream_destroy(self, stream: int) -> None:
        self._check("cudaStreamDestroy", self._lib.cudaStreamDestroy(stream))

    def mem_get_info(self) -> Tuple[int, int]:
        """(free, total) bytes of the current device."""
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        code = self._lib.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total))
        self._check("cudaMemGetInfo", code)
        return int(free.value), int(total.value)
