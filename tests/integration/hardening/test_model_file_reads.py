"""On a real controller: a model must not make the controller read its own
files. The probe pushed a plain .onnx whose model-local function held a Constant kept in the file
``ctl/admin-token`` (relative, no ``..``); the reference child resolved it against the server's
working directory and the stored reference NPZ held the admin token and the fleet signing key.

Three walls, each tested with real processes: the push refuses a file named by any tensor,
wherever it hides (:mod:`tests.hidden_tensors`); the analysis and reference children run in an
empty private directory under ``python -I``; and they are confined by Landlock, so even a way
around the first two finds the controller's data directory unreadable.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from controller.analysis.bounded_child import Children, InputFile
from controller.analysis.sandbox import abi_version
from controller.demo.sample_models import classifier
from controller.server import Controller
from tests.hidden_tensors import HIDING_PLACES, LENGTH
from tests.integration.hardening.conftest import open_controller

SECRET = b"admin-token-0123456789abcdef"[:LENGTH]


@pytest.fixture
def controller(
    mosquitto: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Controller]:
    """A controller started in a working directory that holds ``ctl/admin-token``, as the
    probe's did (its data directory ``ctl``)."""
    (tmp_path / "ctl").mkdir()
    (tmp_path / "ctl" / "admin-token").write_bytes(SECRET)
    monkeypatch.chdir(tmp_path)
    with open_controller(mosquitto, tmp_path, f"reads-{uuid.uuid4().hex[:10]}/v1") as c:
        yield c


@pytest.mark.parametrize("place", sorted(HIDING_PLACES))
def test_a_model_naming_a_controller_file_is_refused_and_nothing_is_stored(
    api: httpx.Client, place: str
) -> None:
    model = HIDING_PLACES[place]("ctl/admin-token").SerializeToString()

    pushed = api.put("/api/v1/models/leak/versions/1", content=model)

    assert pushed.status_code == 400, pushed.text
    detail = pushed.json()["detail"]
    assert "ctl/admin-token" in detail
    assert "archive" in detail  # says what to push instead
    assert api.get("/api/v1/models/leak/versions/1").status_code == 404


def test_a_child_reads_its_input_and_nothing_of_the_data_directory(
    controller: Controller, api: httpx.Client, tmp_path: Path
) -> None:
    """A real controller's data directory (signing key, SQLite database, artifacts, a pushed
    model) is neither readable, listable nor writable by an analysis child; the file it is given
    is; it runs isolated, in an empty directory of its own, with the address space it was given."""
    assert api.put("/api/v1/models/cls/versions/1", content=classifier()).status_code == 201
    data_dir = controller.settings.data_dir
    files = [p for p in data_dir.rglob("*") if p.is_file()] + [tmp_path / "jetfleet.db"]
    secrets = sorted(str(p) for p in files)
    assert any(p.endswith(".key") for p in secrets), secrets  # the fleet signing key is there
    given = tmp_path / "data" / "given.txt"
    given.write_text("the model's bytes")
    workdir = tmp_path / "work"
    workdir.mkdir(mode=0o700)

    ended = Children().run(
        "tests.confined_child",
        [InputFile(given), str(data_dir), *secrets],
        timeout_s=60,
        workdir=workdir,
        memory_bytes=3 << 30,
    )

    assert ended.ok, ended.reason("the child")
    seen = json.loads((workdir / "seen.json").read_text())
    assert seen["input"] == "the model's bytes"
    assert seen["cwd_entries"] == []
    assert seen["isolated"] == 1
    assert seen["address_space"] == 3 << 30
    assert abi_version() >= 1, "this kernel has no Landlock: the third wall cannot be tested"
    assert seen["reads"] == dict.fromkeys(secrets, "PermissionError")
    assert seen["list_target"] == "PermissionError"
    assert seen["write_target"] == "PermissionError"
    assert not (data_dir / "planted").exists()
    assert os.getcwd() == str(tmp_path)  # the server's own directory is not the child's
