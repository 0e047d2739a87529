"""Admission decides warm / refit / cold / refuse from needs and measured headroom."""

from __future__ import annotations

from pathlib import Path

from agent.swap.admission import Headroom, MiB, Need, decide, need_of
from agent.swap.headroom import HeadroomProbe
from agent.trt_host.arena import next_arena_size

ROOM = Headroom(available_bytes=1000 * MiB, budget_bytes=2000 * MiB, source="test")


def test_warm_when_both_fit_and_margin_is_counted() -> None:
    new = need_of(200 * MiB, 100 * MiB, 10 * MiB)
    assert new.margin_bytes == 31 * MiB
    decision = decide(new, Need(300 * MiB), [Need(300 * MiB)], ROOM)
    assert decision.mode == "warm"


def test_every_resident_model_counts_against_the_budget() -> None:
    new, old = Need(400 * MiB), Need(400 * MiB)
    others = [Need(700 * MiB), Need(600 * MiB)]
    decision = decide(new, old, [old, *others], ROOM)
    assert decision.mode == "cold"
    assert "over the budget" in decision.reason


def test_cold_when_only_after_unloading_and_refit_preferred_when_possible() -> None:
    new, old = Need(700 * MiB), Need(600 * MiB)
    room = Headroom(500 * MiB, 4000 * MiB, "test")
    assert decide(new, old, [old], room).mode == "cold"
    assert decide(new, old, [old], room, refittable=True).mode == "refit"


def test_refuse_names_the_shortfall() -> None:
    decision = decide(Need(3000 * MiB), Need(100 * MiB), [Need(100 * MiB)], ROOM)
    assert decision.mode == "refuse"
    assert "short by" in decision.reason


def test_fragmented_jetson_memory_refuses_a_warm_load() -> None:
    room = Headroom(4000 * MiB, 8000 * MiB, "MemAvailable, lfb", lfb_bytes=64 * MiB)
    decision = decide(Need(500 * MiB), Need(500 * MiB), [Need(500 * MiB)], room)
    assert decision.mode == "cold"
    assert "fragmented" in decision.reason


def test_arena_grows_rarely_in_big_steps() -> None:
    sizes = [0]
    for needed in range(1, 400 * MiB, 7 * MiB):
        sizes.append(next_arena_size(sizes[-1], needed))
    assert len(set(sizes)) <= 5
    assert next_arena_size(128 * MiB, 100 * MiB) == 128 * MiB
    assert next_arena_size(128 * MiB, 129 * MiB) == 256 * MiB


def test_headroom_reads_meminfo_and_buddyinfo_of_a_jetson(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/meminfo").write_text(
        "MemTotal: 7800000 kB\nMemAvailable: 3000000 kB\nNvMapMemUsed: 500000 kB\n"
    )
    (tmp_path / "proc/buddyinfo").write_text(
        "Node 0, zone DMA 1 1 1 1 1 1 1 1 1 1 3\nNode 0, zone Normal 5 5 5 5 5 5 5 5 5 5 7\n"
    )
    probe = HeadroomProbe("jetson", root=tmp_path, page_size=4096)
    room = probe.headroom()
    assert room.available_bytes == 3000000 * 1024
    assert room.lfb_bytes == 10 * 4 * MiB
    snap = probe.snapshot()
    assert snap.nvmap_used_bytes == 500000 * 1024
    assert snap.lfb_bytes == 40 * MiB
