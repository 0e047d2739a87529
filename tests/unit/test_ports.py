"""The ports the tests give their child servers cannot be taken by an outgoing connection."""

from __future__ import annotations

import socket

import pytest

from tests import ports


def test_a_handed_out_port_is_below_the_ephemeral_range_and_bindable() -> None:
    port = ports.free_port()
    assert port < ports._ephemeral_start()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_two_workers_of_one_run_hand_out_disjoint_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    slices = []
    for worker in ("gw0", "gw1", "gw7"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        slices.append(set(ports._port_slice()))
    assert all(slices)
    assert sum(len(s) for s in slices) == len(set().union(*slices))
