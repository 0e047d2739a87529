"""Agent releases pushed to a real controller (SQLite and PostgreSQL) over real HTTP: the .deb
and the release tree, their metadata read from the file, the manifest signed with the fleet
key, refusals of what is not a release, 409 on other bytes, the CLI, and the download a device
makes with its own token (HTTP Range)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import httpx
from click.testing import CliRunner

from agent.trust.signatures import verify
from controller.cli.main import cli
from controller.server import Controller
from shared.manifests import SignedManifest
from tests.integration.agent_releases.release_files import deb, tree, write
from tests.integration.controller.conftest import admin_token, bearer, new_token
from tests.integration.signing.harness import active_key


def _cli(controller: Controller) -> CliRunner:
    return CliRunner(env={"JETFLEET_TOKEN": admin_token(controller)})


def test_push_deb_and_tree_list_and_download(
    db_controller: Controller, db_api: httpx.Client, tmp_path: Path
) -> None:
    runner = _cli(db_controller)
    url = ["--url", db_controller.http_url]
    package = write(tmp_path / "jetfleet-agent_0.3.0-1_arm64.deb", deb("1:0.3.0-1", "arm64"))
    pushed = runner.invoke(cli, ["agent", "releases", "push", str(package), *url])
    assert pushed.exit_code == 0, pushed.output
    assert "uploading jetfleet-agent_0.3.0-1_arm64.deb:" in pushed.stderr
    assert "(100%)" in pushed.stderr
    assert "pushed agent release 0.3.0 (aarch64, deb)" in pushed.stdout
    key = active_key(db_controller.settings)
    assert f"signed by {key.key_id}" in pushed.stdout

    release_tree = write(tmp_path / "release.tar.gz", tree("0.3.0", "x86_64"))
    as_json = runner.invoke(cli, ["agent", "releases", "push", str(release_tree), "--json", *url])
    assert as_json.exit_code == 0, as_json.output
    out = json.loads(as_json.stdout)
    assert (out["version"], out["arch"], out["format"]) == ("0.3.0", "x86_64", "tar.gz")
    assert out["python"] == "3.10"
    assert out["jetpack"] == ["6"]
    assert out["details"]["entry"] == "bin/jetfleet-agent"
    assert out["sha256"] == hashlib.sha256(release_tree.read_bytes()).hexdigest()

    listed = runner.invoke(cli, ["agent", "releases", "ls", "--json", *url])
    assert listed.exit_code == 0, listed.output
    releases = json.loads(listed.stdout)
    assert [(r["version"], r["arch"], r["format"]) for r in releases] == [
        ("0.3.0", "aarch64", "deb"),
        ("0.3.0", "x86_64", "tar.gz"),
    ]
    assert releases[0]["python"] == "3.10"
    assert releases[0]["jetpack"] == ["6"]
    assert all(r["signed"] and r["key_id"] == key.key_id for r in releases)
    table = runner.invoke(cli, ["agent", "releases", "ls", *url])
    assert "VERSION" in table.stdout
    assert "aarch64" in table.stdout

    # a device downloads the release with its own token, a range at a time
    device = new_token(db_controller, "gw-dl", "device", device_id="gw-dl")
    data = release_tree.read_bytes()
    head = httpx.get(releases[1]["url"], headers={**bearer(device), "Range": "bytes=0-99"})
    assert head.status_code == 206, head.text
    assert head.content == data[:100]
    rest = httpx.get(releases[1]["url"], headers={**bearer(device), "Range": "bytes=100-"})
    assert head.content + rest.content == data
    # ...and may not push one
    refused = httpx.post(
        f"{db_controller.http_url}/api/v1/agent/releases", content=data, headers=bearer(device)
    )
    assert refused.status_code == 403


def test_same_bytes_again_is_200_other_bytes_409(
    db_controller: Controller, db_api: httpx.Client
) -> None:
    first = db_api.post("/api/v1/agent/releases", content=deb("0.4.0", "amd64"))
    assert first.status_code == 201, first.text
    again = db_api.post("/api/v1/agent/releases", content=deb("0.4.0", "amd64"))
    assert again.status_code == 200, again.text
    assert again.json()["sha256"] == first.json()["sha256"]
    other = db_api.post("/api/v1/agent/releases", content=deb("0.4.0", "amd64", payload=b"x"))
    assert other.status_code == 409, other.text
    assert (
        "agent release 0.4.0 (x86_64) already exists with different bytes"
        in (other.json()["detail"])
    )
    # the audit log says who pushed which release
    audit = db_api.get("/api/v1/audit").json()
    pushes = [r for r in audit if r["action"] == "POST /api/v1/agent/releases"]
    assert [(r["status"], r["detail"].get("release")) for r in pushes] == [
        (409, None),
        (200, "0.4.0"),
        (201, "0.4.0"),
    ]
    assert pushes[-1]["detail"]["arch"] == "x86_64"
    assert pushes[-1]["actor"] == "tests-admin"
    # the other architecture of the same version is another release, and so is an aarch64
    # build for another JetPack line (another system Python)
    arm = db_api.post("/api/v1/agent/releases", content=deb("0.4.0", "arm64", payload=b"x"))
    assert arm.status_code == 201, arm.text
    jp5 = deb("0.4.0", "arm64", python="3.8", payload=b"x")
    assert db_api.post("/api/v1/agent/releases", content=jp5).status_code == 201
    clash = db_api.post("/api/v1/agent/releases", content=deb("0.4.0", "arm64", payload=b"y"))
    assert clash.status_code == 409
    assert "0.4.0 (aarch64, JetPack 6) already exists" in clash.json()["detail"]
    listed = db_api.get("/api/v1/agent/releases").json()
    assert [(r["arch"], r["jetpack"]) for r in listed] == [
        ("x86_64", []),
        ("aarch64", ["6"]),
        ("aarch64", ["5"]),
    ]


def test_manifest_is_signed_by_the_fleet_key(controller: Controller, api: httpx.Client) -> None:
    data = tree("0.5.0", "x86_64")
    assert api.post("/api/v1/agent/releases", content=data).status_code == 201
    services = controller.services
    assert services is not None
    assert services.agent_releases is not None
    [release] = services.agent_releases.releases()
    assert release.signed_manifest is not None
    signed = SignedManifest.model_validate(release.signed_manifest)
    m = signed.manifest
    assert (m.kind, m.name, m.version) == ("agent", "jetfleet-agent", "0.5.0")
    assert (m.sha256, m.size) == (hashlib.sha256(data).hexdigest(), len(data))
    key = active_key(controller.settings)
    assert verify(key.public_key, m.payload(), signed.signature)


def test_what_is_not_a_release_is_refused(
    controller: Controller, api: httpx.Client, tmp_path: Path
) -> None:
    cases = {
        b"just some bytes": "not an agent release",
        deb("0.3.0", "amd64", package="nginx"): "the package is 'nginx', not jetfleet-agent",
        deb("0.3.0", "armhf"): "architecture 'armhf' is not arm64 or amd64",
        tree("0.3.0", "riscv64"): "arch 'riscv64' is not aarch64 or x86_64",
        tree("not a version!", "x86_64"): "is not a release version",
        tree("0.3.0", "x86_64", entry=""): "entry (the executable in the tree) is missing",
        b"\x1f\x8b" + b"broken gzip": "not a readable .tar.gz release tree",
    }
    for data, reason in cases.items():
        answer = api.post("/api/v1/agent/releases", content=data)
        assert answer.status_code == 400, (reason, answer.text)
        assert reason in answer.json()["detail"], answer.text
    no_meta = _no_release_json()
    answer = api.post("/api/v1/agent/releases", content=no_meta)
    assert answer.status_code == 400
    assert "no release.json at its top" in answer.json()["detail"]
    assert api.get("/api/v1/agent/releases").json() == []
    # nothing of the refused uploads stays in the artifact store
    leftovers = [p for p in (controller.settings.data_dir / "artifacts").rglob("*") if p.is_file()]
    assert leftovers == []

    bad = write(tmp_path / "bad.deb", b"!<arch>\nnothing")
    result = _cli(controller).invoke(
        cli, ["agent", "releases", "push", str(bad), "--url", controller.http_url]
    )
    assert result.exit_code == 1
    assert "Error:" in result.output
    assert ".deb" in result.output


def _no_release_json() -> bytes:
    import io
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        info = tarfile.TarInfo("tree/bin/jetfleet-agent")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"#!"))
    return out.getvalue()
