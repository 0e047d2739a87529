"""The broker ACL decisions, and the dynamic security ACLs spelled from them."""

from __future__ import annotations

import pytest

from controller.broker_admin.acl import (
    controller_acls,
    controller_may_publish,
    controller_may_subscribe,
    device_acls,
    device_may_publish,
    device_may_receive,
    device_may_subscribe,
    device_of_username,
    device_username,
)

P = "jetfleet/v1"


@pytest.mark.parametrize("channel", ["reported", "telemetry", "events", "status"])
def test_a_device_publishes_on_its_own_channels(channel: str) -> None:
    assert device_may_publish("gw-a", f"{P}/gw-a/{channel}", P)


@pytest.mark.parametrize(
    "topic",
    [
        f"{P}/gw-b/reported",  # another device's channel
        f"{P}/gw-a/desired",  # the controller's channel
        f"{P}/gw-a/reported/extra",
        f"{P}/+/reported",
        f"{P}/#",
        "other/v1/gw-a/reported",
        "$CONTROL/dynamic-security/v1",
    ],
)
def test_a_device_publishes_nowhere_else(topic: str) -> None:
    assert not device_may_publish("gw-a", topic, P)


def test_a_device_subscribes_only_to_its_own_desired_state() -> None:
    assert device_may_subscribe("gw-a", f"{P}/gw-a/desired", P)
    for other in (f"{P}/gw-b/desired", f"{P}/+/desired", f"{P}/#", "#", f"{P}/gw-a/reported"):
        assert not device_may_subscribe("gw-a", other, P)
    assert device_may_receive("gw-a", f"{P}/gw-a/desired", P)
    assert not device_may_receive("gw-a", f"{P}/gw-b/desired", P)


def test_the_controller_reads_agents_and_writes_desired_state() -> None:
    assert controller_may_subscribe(f"{P}/+/reported", P)
    assert controller_may_subscribe(f"{P}/gw-a/telemetry", P)
    assert not controller_may_subscribe(f"{P}/+/desired", P)
    assert not controller_may_subscribe("#", P)
    assert controller_may_publish(f"{P}/gw-a/desired", P)
    assert not controller_may_publish(f"{P}/gw-a/reported", P)


def test_device_user_names_round_trip_and_nothing_else_is_a_device() -> None:
    assert device_of_username(device_username("gw-a.1")) == "gw-a.1"
    assert device_of_username("jetfleet-controller") is None
    assert device_of_username("dev-") is None
    assert device_of_username("dev-a/b") is None


def test_dynsec_device_acls_allow_exactly_what_the_decisions_allow() -> None:
    acls = device_acls("gw-a", P)
    sends = {a["topic"] for a in acls if a["acltype"] == "publishClientSend" and a["allow"]}
    assert sends == {f"{P}/gw-a/{c}" for c in ("reported", "telemetry", "events", "status")}
    assert all(device_may_publish("gw-a", t, P) for t in sends)
    subs = {a["topic"] for a in acls if a["acltype"].startswith("subscribe") and a["allow"]}
    assert subs == {f"{P}/gw-a/desired"}
    receives = {a["topic"] for a in acls if a["acltype"] == "publishClientReceive"}
    assert receives == {f"{P}/gw-a/desired"}


def test_dynsec_controller_acls_cover_ingest_desired_state_and_admin() -> None:
    acls = controller_acls(P)
    subs = {a["topic"] for a in acls if a["acltype"] == "subscribeLiteral"}
    assert {f"{P}/+/{c}" for c in ("reported", "telemetry", "events", "status")} <= subs
    assert "$CONTROL/dynamic-security/v1/response" in subs
    sends = {a["topic"] for a in acls if a["acltype"] == "publishClientSend"}
    assert sends == {f"{P}/+/desired", "$CONTROL/dynamic-security/v1"}
    assert all(controller_may_subscribe(t, P) for t in subs if t.startswith(P))
