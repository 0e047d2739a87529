"""The built wheel works on its own: migrations travel inside it, `jetfleet db upgrade` runs."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.timeout(300), pytest.mark.xdist_group("wheel")]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (found,) = out.glob("jetfleet-*.whl")
    return found


def test_wheel_carries_migrations_and_data(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "controller/_migrations/env.py" in names
    assert any(n.startswith("controller/_migrations/versions/0001_") for n in names)
    assert "agent/hardware/data/jetson_modules.tsv" in names
    assert "shared/py.typed" in names
    assert not any(n.startswith("tests/") for n in names)


def test_db_upgrade_from_the_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    target = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = target / "site-packages"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    # Dependencies come from the test environment; the jetfleet code only from the wheel.
    env = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    db = tmp_path / "fleet.db"
    work = tmp_path / "elsewhere"
    work.mkdir()
    code = (
        "import controller, sys; from controller.cli.main import main; "
        "print(controller.__file__, file=sys.stderr); "
        "sys.argv=['jetfleet','db','upgrade','--db',sys.argv[1]]; main()"
    )
    result = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code, f"sqlite:///{db}"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert str(site) in result.stderr, "controller must come from the wheel, not the checkout"
    assert "upgraded" in result.stdout
    assert db.exists()
