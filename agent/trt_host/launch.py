"""Where a child under another interpreter finds ``agent.trt_host``: the package root, or a
directory holding only ``agent/__init__.py`` (empty) and ``agent/trt_host`` (a link).

The host (:mod:`agent.runtimes.host`) and the TensorRT interpreter probe
(:mod:`agent.hardware.trt_python`) both run ``<python> -m agent.trt_host...`` under JetPack's
Python, whose ``sys.path`` must not see the rest of the agent (Python >= 3.10 code, and the
agent's site-packages built for another Python). Here, not in agent/runtimes, so the hardware
probe (the agent's lowest layer) can use it too. Standard library only, Python 3.8 syntax.

The caller owns the directory :func:`isolated_root` makes and removes it with
``shutil.rmtree`` (which unlinks the link and never follows it).
"""

from __future__ import annotations

import tempfile
from pathlib import Path


def package_root() -> Path:
    """The directory holding the ``agent`` package (the repository or site-packages)."""
    return Path(__file__).resolve().parents[2]


def isolated_root(prefix: str = "jetfleet-trt-host-") -> Path:
    """A new directory holding ``agent/__init__.py`` (empty) and ``agent/trt_host`` (a link)."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    (root / "agent").mkdir()
    (root / "agent" / "__init__.py").write_text("")
    (root / "agent" / "trt_host").symlink_to(package_root() / "agent" / "trt_host")
    return root
