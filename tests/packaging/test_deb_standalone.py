"""JetPack 5 (Ubuntu 20.04, Python 3.8): `PYTHON_STANDALONE=DIR packaging/build-deb.sh agent`
bundles a relocatable CPython >= 3.10 at /opt/jetfleet/python and the agent runs on it.

No aarch64 focal host and no python-build-standalone archive are reachable here, so the tree is a
stand-in made from this machine's own CPython (the prefix behind the test's interpreter) in
python-build-standalone's install_only layout. The package is installed into a throwaway root as
in test_deb.py, then run where its absolute paths (the venv's shebangs, `pyvenv.cfg`'s `home`, the
venv's `bin/python` link) resolve into that root: a private mount namespace with the root's /opt
on /opt and the stand-in's source prefix hidden, so nothing can fall back to it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

# NEEDS: the same as test_deb.py's (dpkg, root, /usr/bin/python3); `unshare` is util-linux.
from tests.packaging.test_deb import NEEDS, NFPM, ROOT, install

pytestmark = [*NEEDS, pytest.mark.slow, pytest.mark.xdist_group("deb_standalone")]

VERSION = f"{sys.version_info[0]}.{sys.version_info[1]}"
SOURCE = Path(sys.base_prefix)
STDLIB_SKIP = ("site-packages", "dist-packages", "test", "idlelib", "tkinter", "turtledemo")


def build(out: Path, tree: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["BUILD_PY"] = sys.executable
    if NFPM.exists():
        env["NFPM"] = str(NFPM)
    return subprocess.run(
        ["sh", str(ROOT / "packaging" / "build-deb.sh"), "-o", str(out), "agent"],
        capture_output=True,
        text=True,
        env={**env, "PYTHON_STANDALONE": str(tree)},
        check=False,
    )


def copy_interpreter(dest: Path, *, relocate: bool) -> Path:
    """This machine's CPython as an install_only tree: bin/python3.X (+ python3), the standard
    library, and libpython when the build is shared. A shared build (pyenv's) has an absolute
    RUNPATH naming its prefix's lib/, so a plain copy loads that prefix's libpython, or, once that
    is gone, the distribution's of the same soname (Debian's 3.11.2 here) under another version's
    standard library: it is not relocatable as it is. python-build-standalone links with
    `$ORIGIN/../lib`; `relocate` writes that into the copy's RUNPATH (same-length string)."""
    (dest / "bin").mkdir(parents=True)
    binary = dest / "bin" / f"python{VERSION}"
    shutil.copy2(SOURCE / "bin" / f"python{VERSION}", binary)
    (dest / "bin" / "python3").symlink_to(binary.name)
    stdlib = dest / "lib" / f"python{VERSION}"
    shutil.copytree(
        SOURCE / "lib" / f"python{VERSION}",
        stdlib,
        symlinks=True,
        ignore=shutil.ignore_patterns(*STDLIB_SKIP, "config-*", "__pycache__"),
    )
    (stdlib / "site-packages").mkdir()
    for lib in (SOURCE / "lib").glob(f"libpython{VERSION}*.so*"):
        shutil.copy2(lib, dest / "lib" / lib.name, follow_symlinks=False)
    if relocate:
        built = str(SOURCE / "lib").encode() + b"\0"
        origin = b"$ORIGIN/../lib"
        data = binary.read_bytes()
        binary.write_bytes(data.replace(built, origin + b"\0" * (len(built) - len(origin))))
    return dest


def shared_libpython() -> str | None:
    return (
        sysconfig.get_config_var("INSTSONAME")
        if sysconfig.get_config_var("Py_ENABLE_SHARED")
        else None
    )


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = copy_interpreter(tmp_path_factory.mktemp("standalone") / "python", relocate=True)
    ran = subprocess.run(
        [str(dest / "bin/python3"), "-I", "-c", "import sys; print(sys.prefix)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert ran.stdout.strip() == str(dest), "the stand-in tree does not run from its new place"
    return dest


@pytest.fixture(scope="module")
def deb(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("debs-standalone")
    done = build(out, tree)
    assert done.returncode == 0, done.stderr[-4000:]
    (package,) = out.glob("jetfleet-agent_*.deb")
    return package


@pytest.fixture(scope="module")
def installed(deb: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install(tmp_path_factory.mktemp("root-standalone"), deb)


def on_gateway(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """Runs argv with root's /opt on /opt and the stand-in's source prefix hidden (tmpfs)."""
    mounts = f"mount --bind {shlex.quote(str(root / 'opt'))} /opt"
    if not str(SOURCE).startswith("/usr"):
        mounts += f" && mount -t tmpfs hidden {shlex.quote(str(SOURCE))}"
    script = f'{mounts} && exec "$@"'
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *argv],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        cwd="/",
        check=False,
    )


def test_the_package_carries_its_python_and_depends_on_no_system_python(deb: Path) -> None:
    listing = subprocess.run(
        ["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True
    ).stdout
    names = {line.split()[5] for line in listing.splitlines()}
    assert "./opt/jetfleet/python/bin/python3" in names
    assert f"./opt/jetfleet/python/lib/python{VERSION}/os.py" in names
    depends = subprocess.run(
        ["dpkg-deb", "-f", str(deb), "Depends"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert depends == "systemd"


def test_the_installed_agent_runs_on_the_bundled_python(installed: Path) -> None:
    version = on_gateway(installed, "/opt/jetfleet/venv/bin/jetfleet-agent", "--version")
    assert version.returncode == 0, version.stderr
    assert "version" in version.stdout
    code = (
        "import json, os, sys, onnxruntime, agent; print(json.dumps({"
        "'prefix': sys.prefix, 'base_prefix': sys.base_prefix, 'os': os.__file__, "
        "'agent': agent.__file__, 'libpython': sorted({l.split()[-1] for l in "
        "open('/proc/self/maps') if '/libpython' in l})}))"
    )
    ran = on_gateway(installed, "/opt/jetfleet/venv/bin/python", "-c", code)
    assert ran.returncode == 0, ran.stderr
    facts = json.loads(ran.stdout)
    assert facts["prefix"] == "/opt/jetfleet/venv"
    assert facts["base_prefix"] == "/opt/jetfleet/python"
    assert facts["os"] == f"/opt/jetfleet/python/lib/python{VERSION}/os.py"
    assert facts["agent"].startswith(f"/opt/jetfleet/venv/lib/python{VERSION}/site-packages/")
    soname = shared_libpython()
    assert facts["libpython"] == ([f"/opt/jetfleet/python/lib/{soname}"] if soname else [])
    links = {
        os.readlink(p) for p in (installed / "opt/jetfleet/venv/bin").iterdir() if p.is_symlink()
    }
    assert {link for link in links if link.startswith("/")} == {"/opt/jetfleet/python/bin/python3"}
    assert (
        "home = /opt/jetfleet/python/bin\n"
        in (installed / "opt/jetfleet/venv/pyvenv.cfg").read_text()
    )


def test_the_installed_agent_still_asks_another_python_for_tensorrt(installed: Path) -> None:
    code = (
        "from agent.hardware.trt_python import discover, ask; import json, sys; "
        "print(sys.base_prefix); print(json.dumps(ask('/usr/bin/python3'))); "
        "print(discover('/usr/bin/python3').reason)"
    )
    done = on_gateway(installed, "/opt/jetfleet/venv/bin/python", "-c", code)
    assert done.returncode == 0, done.stderr
    agent_python, answer, reason = done.stdout.splitlines()
    assert agent_python == "/opt/jetfleet/python"
    assert '"import_error": "ModuleNotFoundError: No module named \'tensorrt\'"' in answer
    assert reason.startswith("tensorrt_python = /usr/bin/python3: Python 3.")
    assert reason.endswith(
        "cannot import tensorrt (ModuleNotFoundError: No module named 'tensorrt')"
    )


def test_a_tree_that_is_not_a_relocatable_python_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    empty = build(out, (tmp_path / "empty"))
    assert empty.returncode == 1
    assert "is not a directory" in empty.stderr
    (tmp_path / "empty").mkdir()
    empty = build(out, (tmp_path / "empty"))
    assert empty.returncode == 1
    assert "has no bin/python3, so it is not a relocatable CPython tree" in empty.stderr
    assert "install_only.tar.gz" in empty.stderr
    binary = SOURCE / "bin" / f"python{VERSION}"
    if shared_libpython() is None or str(SOURCE / "lib").encode() not in binary.read_bytes():
        return  # this CPython is static or already relative: a plain copy IS relocatable
    copied = build(out, copy_interpreter(tmp_path / "copied", relocate=False))
    assert copied.returncode == 1
    assert f"loads {SOURCE}/lib/{shared_libpython()} from outside" in copied.stderr
    assert "so the tree is not relocatable" in copied.stderr
    assert not list(out.glob("*.deb"))
