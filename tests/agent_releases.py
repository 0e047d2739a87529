"""Agent release archives built in a second, for the self-update tests and benchmarks.

:func:`make_release_tree` writes a release tree whose entry runs *this checkout's* agent code
under the dev venv's Python, reporting another version: the tree's ``site/`` holds a
``jetfleet-<version>.dist-info`` put first on ``PYTHONPATH``, so
``importlib.metadata.version("jetfleet")`` (the agent's ``agent_version()``) answers the
tree's version. :func:`make_release_archive` packs it as the ``tar.gz`` the agent installs.

``broken=True`` makes a release whose ``run`` exits at once (status 3) while its
``self-check`` passes: it gets switched to, then never confirms, so the launcher rolls back.
"""

from __future__ import annotations

import io
import json
import os
import platform
import sys
import tarfile
from pathlib import Path

PADDING_BYTES = 256 * 1024
"""A file of this size makes the archive span several download chunks (64 KiB each)."""

ENTRY = """#!/bin/sh
# Release {version} (tests/agent_releases.py): this checkout's agent, reporting {version}.
here=$(cd "$(dirname "$0")/.." && pwd)
{broken}PYTHONPATH="$here/site${{PYTHONPATH:+:$PYTHONPATH}}"
export PYTHONPATH
exec {python} -c 'import sys; sys.argv[0] = "jetfleet-agent"; from agent.cli import main; \
main()' "$@"
"""
BROKEN = """if [ "${{1:-}}" = run ]; then
    echo "release {version} is broken on purpose: exiting at start" >&2
    exit 3
fi
"""


def make_release_tree(dest: Path, version: str, broken: bool = False) -> Path:
    """Write release ``version``'s tree into ``dest`` (created) and return ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "bin").mkdir(exist_ok=True)
    entry = dest / "bin" / "jetfleet-agent"
    entry.write_text(
        ENTRY.format(
            version=version,
            python=sys.executable,
            broken=BROKEN.format(version=version) if broken else "",
        )
    )
    entry.chmod(0o755)
    info = dest / "site" / f"jetfleet-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: jetfleet\nVersion: {version}\n")
    (dest / "padding.bin").write_bytes(os.urandom(PADDING_BYTES))
    python = "{}.{}".format(*sys.version_info[:2])
    meta = {"version": version, "arch": platform.machine(), "python": python}
    meta |= {"schema": "jetfleet/agent-release/1", "entry": "bin/jetfleet-agent"}
    (dest / "release.json").write_text(json.dumps(meta))
    return dest


def make_release_archive(work: Path, version: str, broken: bool = False) -> bytes:
    """The ``tar.gz`` of release ``version`` (its tree built under ``work``)."""
    tree = make_release_tree(work / f"tree-{version}", version, broken)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        for path in sorted(tree.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(tree)), recursive=False)
    return buffer.getvalue()
