"""Labels come from the operator or the enrolment token, never from the device: a device that
reported ``labels`` or asked for extra ones at enrolment used to get them, and selectors then
targeted it."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent.cli import cli as agent_cli
from controller.cli.main import cli
from controller.demo import sample_models
from shared.codec import encode
from shared.topics import Channel
from tests.integration.controller.agent_messages import reported
from tests.integration.controller.conftest import new_token, poll
from tests.integration.security_broker.acl_broker import Peer
from tests.integration.security_broker.conftest import Secured

embedded_only = pytest.mark.parametrize("secured", ["embedded"], indirect=True)


def _token(secured: Secured, **body: object) -> str:
    created = secured.api.post("/api/v1/enrol-tokens", json=body)
    assert created.status_code == 201, created.text
    return str(created.json()["token"])


def _device(secured: Secured, device_id: str) -> dict[str, Any] | None:
    answer = secured.api.get(f"/api/v1/devices/{device_id}")
    return answer.json() if answer.status_code == 200 else None


def _push_classifier(secured: Secured) -> None:
    pushed = secured.api.put(
        "/api/v1/models/classifier/versions/1", content=sample_models.classifier()
    )
    assert pushed.status_code == 201, pushed.text


def _deploy(secured: Secured, selector: str) -> tuple[int, Any]:
    answer = secured.api.post(
        "/api/v1/deployments", json={"model": "classifier", "version": "1", "selector": selector}
    )
    return answer.status_code, answer.json()


def test_labels_a_device_reports_do_not_make_selectors_match_it(
    secured: Secured, peer: Callable[..., Peer]
) -> None:
    identity = secured.enrol("gw-a", labels={"site": "line-1"})
    device = peer(identity["broker_username"], identity["broker_password"])
    assert str(device.connect()) == "Success"

    device.publish(
        secured.topic("gw-a", Channel.REPORTED),
        encode(reported("gw-a", {"site": "evil"})),
        retain=True,
    )
    shown = poll(
        lambda: (d := _device(secured, "gw-a")) and d["facts"] and d,
        what="the controller to store gw-a's report",
    )

    assert shown["labels"] == {"site": "line-1"}
    _push_classifier(secured)
    status, body = _deploy(secured, "site=evil")
    assert status == 404
    assert "no device matches selector 'site=evil'" in body["detail"]
    status, body = _deploy(secured, "site=line-1")
    assert status == 200, body
    assert [d["device_id"] for d in body["devices"]] == ["gw-a"]


@embedded_only
def test_enrolment_gives_the_tokens_labels_not_the_ones_the_agent_asks_for(
    secured: Secured, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="controller.trust.enrolment")
    labelled = _token(secured, labels={"site": "line-1"})
    unlabelled = _token(secured)
    asked = {"site": "evil", "tier": "gold"}

    answers = [
        secured.api.post(
            "/api/v1/enroll",
            json={"token": token, "device_id": device_id, "labels": asked},
            headers={"Authorization": ""},
        )
        for token, device_id in ((labelled, "gw-b"), (unlabelled, "gw-c"))
    ]

    assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
    assert [a.json()["labels"] for a in answers] == [{"site": "line-1"}, {}]
    assert (_device(secured, "gw-b") or {}).get("labels") == {"site": "line-1"}
    assert "tier" not in secured.api.get("/api/v1/devices").text
    warned = [r.getMessage() for r in caplog.records if "asked for labels" in r.getMessage()]
    assert any("gw-b asked for labels site=evil,tier=gold" in m for m in warned), warned


@embedded_only
def test_jetfleet_agent_enroll_warns_about_labels_it_was_not_given(
    secured: Secured, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JETFLEET_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("JETFLEET_LABELS", json.dumps({"site": "evil", "tier": "gold"}))
    monkeypatch.setenv("JETFLEET_SIMULATED_PROFILE", "orin-nano-8gb")
    token = _token(secured, labels={"site": "line-1"})

    result = CliRunner().invoke(
        agent_cli,
        [
            "enroll",
            "--controller",
            secured.controller.http_url,
            "--token",
            token,
            "--device-id",
            "gw-d",
            "--json",
        ],
    )

    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["labels"] == {"site": "line-1"}
    assert summary["ignored_labels"] == {"site": "evil", "tier": "gold"}
    assert "the controller ignored the labels site=evil,tier=gold" in result.stderr
    stored = json.loads((tmp_path / "state" / "identity.json").read_text())
    assert stored["labels"] == {"site": "line-1"}


@embedded_only
def test_an_operator_sets_a_devices_labels_and_a_device_cannot(secured: Secured) -> None:
    identity = secured.enrol("gw-e", labels={"site": "line-1"})
    url = secured.controller.http_url
    operator = ["--url", url, "--token", secured.admin_token]

    def label(*args: str) -> Any:
        return CliRunner().invoke(cli, ["devices", "label", *args, *operator])

    done = label("gw-e", "site=line-2", "tier=gold", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["labels"] == {"site": "line-2", "tier": "gold"}
    _push_classifier(secured)
    status, body = _deploy(secured, "tier=gold")
    assert status == 200, body
    assert [d["device_id"] for d in body["devices"]] == ["gw-e"]

    cleared = label("gw-e", "--clear")
    assert cleared.exit_code == 0, cleared.output
    assert cleared.output.strip() == "gw-e: labels (none)"
    unknown = label("gw-zz", "site=x")
    assert unknown.exit_code == 1
    assert "unknown device 'gw-zz'" in unknown.output
    bad = label("gw-e", "a,b=x")
    assert bad.exit_code == 1
    assert "label key 'a,b'" in bad.output

    body = {"labels": {"site": "evil"}}
    path = "/api/v1/devices/gw-e/labels"
    viewer = new_token(secured.controller, "a-viewer", "viewer")
    for token in (identity["api_token"], viewer):
        refused = secured.api.put(path, json=body, headers={"Authorization": f"Bearer {token}"})
        assert refused.status_code == 403, refused.text
    assert (_device(secured, "gw-e") or {}).get("labels") == {}
