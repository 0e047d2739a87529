"""One memory budget for the swaps and the jobs: reservations decided and held under one lock.

Memory is read from a fixture ``/proc/meminfo`` (the real :class:`HeadroomProbe` pointed at a
temp root); the engines are real ONNX Runtime models.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from agent.errors import ModelLoadError
from agent.runtimes.ort import load_ort
from agent.serving.core import ModelRegistry
from agent.swap.admission import MiB, Need
from agent.swap.budget import MemoryBudget, Reservation
from agent.swap.headroom import HeadroomProbe
from agent.swap.hotswap import AdmissionRefused, Candidate, HotSwapper
from agent.swap.journal import Pointer, SwapJournal
from controller.demo.sample_models import classifier


def budget_of(root: Path, available_mib: int, total_mib: int = 1000) -> MemoryBudget:
    """A budget over a device with ``available_mib`` free of ``total_mib`` (budget 85 %)."""
    (root / "proc").mkdir(parents=True, exist_ok=True)
    (root / "proc/meminfo").write_text(
        f"MemTotal: {total_mib * 1024} kB\nMemAvailable: {available_mib * 1024} kB\n"
    )
    return MemoryBudget(HeadroomProbe("cpu", root=root))


def reserve_at_once(budget: MemoryBudget, need: Need, labels: list[str]) -> list[Reservation]:
    """Each label reserves ``need`` on its own thread, all released at the same instant."""
    start = threading.Barrier(len(labels))
    got: list[Reservation] = []
    lock = threading.Lock()

    def reserve(label: str) -> None:
        start.wait()
        reservation = budget.reserve(need, label)
        with lock:
            got.append(reservation)

    threads = [threading.Thread(target=reserve, args=(label,)) for label in labels]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return got


def test_two_reservations_that_together_exceed_the_headroom_one_is_refused(
    tmp_path: Path,
) -> None:
    for attempt in range(20):
        budget = budget_of(tmp_path / str(attempt), available_mib=100)

        got = reserve_at_once(budget, Need(60 * MiB), ["job:profile", "classifier 2"])

        granted = [r for r in got if r.granted]
        refused = [r for r in got if not r.granted]
        assert (len(granted), len(refused)) == (1, 1)
        assert "less 60 MiB reserved by loads in progress" in refused[0].admission.reason
        assert budget.reserved() == granted


def test_a_released_reservation_makes_room_and_releasing_twice_changes_nothing(
    tmp_path: Path,
) -> None:
    budget = budget_of(tmp_path, available_mib=100)
    with budget.reserve(Need(60 * MiB), "job:a") as first:
        assert first.granted
        assert not budget.reserve(Need(60 * MiB), "job:b").granted
    first.release()
    second = budget.reserve(Need(60 * MiB), "job:c")
    assert second.granted
    assert budget.reserved() == [second]


def test_the_accounted_budget_counts_loaded_engines_the_measurement_already_holds(
    tmp_path: Path,
) -> None:
    budget = budget_of(tmp_path, available_mib=900, total_mib=1000)
    served = budget.reserve(Need(500 * MiB), "classifier 1")
    served.loaded()
    beside = budget.reserve(Need(400 * MiB), "job:x")
    assert not beside.granted
    assert "over the budget of 850 MiB" in beside.admission.reason


def candidate(path: Path, version: str, need: Need) -> Candidate:
    return Candidate(
        name="classifier",
        version=version,
        sha256="ab" * 32,
        load=lambda: load_ort(path),
        need=need,
        pointer=Pointer(version, "ab" * 32, str(path), None, "onnxruntime"),
    )


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "classifier.onnx"
    path.write_bytes(classifier())
    return path


def test_an_engine_a_job_is_loading_counts_against_a_swap_until_released(
    tmp_path: Path, model_file: Path
) -> None:
    budget = budget_of(tmp_path / "root", available_mib=100)
    registry = ModelRegistry()
    swapper = HotSwapper(registry, SwapJournal(tmp_path), budget.probe, tmp_path, budget=budget)
    job = budget.reserve(Need(60 * MiB), "job:tune")
    assert job.granted

    with pytest.raises(AdmissionRefused, match="short by 20 MiB"):
        swapper.swap(candidate(model_file, "1", Need(60 * MiB)))
    assert registry.get("classifier") is None
    assert budget.reserved() == [job]

    job.release()
    record = swapper.swap(candidate(model_file, "1", Need(60 * MiB)))
    try:
        assert record.mode == "warm"
        [served] = budget.reserved()
        assert served.label == "classifier 1"
        assert budget.reserve(Need(30 * MiB), "job:profile").granted, (
            "a loaded engine is in the measured headroom: it is not taken off it twice"
        )
    finally:
        swapper.unload("classifier")
    assert [r.label for r in budget.reserved()] == ["job:profile"]


def test_a_swap_that_fails_to_load_gives_its_reservation_back(
    tmp_path: Path, model_file: Path
) -> None:
    budget = budget_of(tmp_path / "root", available_mib=1000)
    swapper = HotSwapper(
        ModelRegistry(), SwapJournal(tmp_path), budget.probe, tmp_path, budget=budget
    )
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")

    with pytest.raises(ModelLoadError):
        swapper.swap(candidate(broken, "1", Need(60 * MiB)))

    assert budget.reserved() == []
    assert swapper.stats.failed == {"classifier": 1}
