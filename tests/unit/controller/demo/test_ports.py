"""The ports given to child servers cannot be taken by an outgoing connection meanwhile."""

from __future__ import annotations

import socket

import pytest

from controller.demo import ports as product
from tests import ports


@pytest.mark.parametrize("pick", [product.free_port, ports.free_port])
def test_a_handed_out_port_is_below_the_ephemeral_range_and_bindable(pick: object) -> None:
    assert callable(pick)
    port = pick()
    assert product.LOWEST <= port < product.ephemeral_start()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_a_port_something_listens_on_is_not_handed_out() -> None:
    with socket.create_server(("127.0.0.1", product.free_port())) as taken:
        busy = taken.getsockname()[1]
        picked = {product.free_port(range(busy, busy + 2)) for _ in range(3)}
    assert busy not in picked


def test_two_workers_of_one_run_pick_from_disjoint_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    slices = []
    for worker in ("gw0", "gw1", "gw7"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        slices.append(set(ports.worker_ports()))
    assert all(slices)
    assert sum(len(s) for s in slices) == len(set().union(*slices))
