"""Adapter for Linux Landlock: a child process that works on an untrusted model gives up reading
anything but code, libraries and its own scratch directory.

A model is its author's program. ONNX Runtime resolves an EXTERNAL tensor's ``location`` by
opening that file, and the controller refuses such models at push (every tensor, functions'
included: :mod:`controller.analysis.onnx_walk`). This is the second wall, for the next way a
parser or runtime can be talked into opening a file: the analysis and reference children run
confined (:func:`confine`), so the controller's data directory (the fleet signing key, tokens, the
database when it is SQLite) and anything else outside the allowed roots cannot be opened, read,
listed or written by them, whatever the model says.

Landlock needs no privilege (Linux >= 5.13, enabled in the kernel's LSM list); rights are granted
per directory tree and a process can only ever drop them. The rules allow reading (and mapping
libraries from) the interpreter's prefixes, the import path's library directories, the code's own
package directories (not the checkout that holds them: a default data directory ``./.jetfleet``
lies beside them), the system's library directories, the few ``/proc``, ``/sys`` and ``/dev``
files runtimes read, and everything in the child's scratch directory. The files a child works on
are opened by the parent and handed over as descriptors
(:class:`controller.analysis.bounded_child.InputFile`): a descriptor needs no path rule.

Only :func:`confine` and :func:`abi_version` touch the kernel (``ctypes`` system calls, the same
numbers on x86_64 and aarch64); :func:`read_roots` is pure.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
_ABI1_ALL = (1 << 13) - 1
"""Every file-system right of Landlock ABI 1 (execute ... make symlink)."""
TRUNCATE = 1 << 14
"""ABI 3."""
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE
"""The rights a rule on a file (not a directory) may carry."""
READ = EXECUTE | READ_FILE | READ_DIR

SYSTEM_READ = (
    "/lib",
    "/lib64",
    "/lib32",
    "/usr/lib",
    "/usr/lib64",
    "/usr/local/lib",
    "/usr/share",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/proc/self",
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/sys/devices/system/cpu",
    "/sys/fs/cgroup",
    "/dev/urandom",
    "/dev/zero",
    "/usr/local/cuda",
)
"""What the interpreter, NumPy and ONNX Runtime (and, on a controller with TensorRT, CUDA's
libraries) read of the system after they start."""
GPU_DEVICES = "/dev/nvidia*"
"""The NVIDIA device files a CUDA context opens read-write (the analysis checks the model
against an installed TensorRT's parser where there is one: ``tensorrt_check``)."""


class SandboxUnavailable(OSError):
    """The kernel has no Landlock (too old, or not in its ``lsm=`` list)."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 where there is none (not Linux, too old, disabled)."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    version = int(libc.syscall(_SYS_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION))
    return max(version, 0)


def read_roots(code_dirs: Iterable[str]) -> list[str]:
    """The directories (and files) a confined child may read: the interpreter's prefixes, the
    import path's entries that are library directories (under a prefix, or named
    site-packages / dist-packages), ``code_dirs`` and :data:`SYSTEM_READ`. A bare checkout on
    the import path (an editable install's ``.pth``) is not a library directory: only the
    packages named in ``code_dirs`` are read from it."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    roots = set(prefixes) | set(code_dirs) | set(SYSTEM_READ)
    for entry in sys.path:
        if not entry:
            continue
        parts = Path(entry).parts
        library = "site-packages" in parts or "dist-packages" in parts
        if library or any(_beneath(entry, p) for p in prefixes):
            roots.add(entry)
    return sorted(roots)


def _beneath(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def confine(read: Sequence[str], write: Sequence[str]) -> int:
    """From now on this thread and every thread and process it starts may read (and map) only
    beneath ``read`` and read, write, create and remove only beneath ``write`` (plus
    ``/dev/null``). Paths that do not exist are left out. Returns the ABI version used;
    :class:`SandboxUnavailable` where the kernel has none. Call it before starting threads:
    threads that already run keep their rights."""
    version = abi_version()
    if version < 1:
        raise SandboxUnavailable("this kernel has no Landlock (Linux >= 5.13 with lsm=landlock)")
    handled = _ABI1_ALL | (TRUNCATE if version >= 3 else 0)
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    attr = _RulesetAttr(handled)
    ruleset = int(libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.sizeof(attr), 0))
    if ruleset < 0:
        raise SandboxUnavailable(f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        rules = [(p, READ) for p in read] + [(p, handled) for p in write]
        rules.append(("/dev/null", READ_FILE | WRITE_FILE | TRUNCATE))
        rules += [(d, READ_FILE | WRITE_FILE) for d in sorted(glob.glob(GPU_DEVICES))]
        for path, rights in rules:
            _allow(libc, ruleset, path, rights & handled)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return version


def _allow(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # not on this system: nothing to allow
    try:
        if not os.path.isdir(path):
            rights &= _FILE_RIGHTS
        rule = _PathBeneathAttr(rights, fd)
        if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
    finally:
        os.close(fd)
