"""The recommendation: the fastest candidate within its precision's tolerance (pure)."""

from __future__ import annotations

from shared.jobs import Accuracy, CandidateResult, recommend


def row(
    name: str, p50: float | None, within: bool | None, status: str = "ok", mode: str | None = None
) -> CandidateResult:
    accuracy = None if within is None else Accuracy(checked="4 cases", within_tolerance=within)
    return CandidateResult.model_validate(
        {
            "name": name,
            "power_mode": mode,
            "status": status,
            "latency_p50_ms": p50,
            "latency_p99_ms": p50,
            "accuracy": accuracy,
        }
    )


def test_a_faster_candidate_outside_tolerance_is_not_recommended() -> None:
    advice = recommend([row("fp32", 9.0, True), row("int8", 2.0, False), row("fp16", 4.0, True)])
    assert advice.candidate == "fp16"
    assert advice.reason == (
        "fastest within tolerance: fp16 (p50 4.000 ms); faster but outside tolerance: int8"
    )


def test_the_fastest_in_tolerance_wins_when_all_are_within() -> None:
    assert recommend([row("a", 3.0, True), row("b", 1.5, True)]).candidate == "b"


def test_rows_that_did_not_run_are_never_recommended() -> None:
    advice = recommend(
        [
            row("fp16", None, None, status="unavailable"),
            row("int8", 0.5, True, status="failed"),
            row("fp32", 5.0, True),
        ]
    )
    assert advice.candidate == "fp32"


def test_nothing_is_recommended_when_no_candidate_is_within_tolerance() -> None:
    advice = recommend([row("fp16", 1.0, False), row("int8", 0.5, False)])
    assert advice.candidate is None
    assert advice.reason == "no candidate stayed within its precision's tolerance"
    assert recommend([row("fp16", None, None, status="unavailable")]).reason == "no candidate ran"


def test_power_modes_are_part_of_the_recommended_label() -> None:
    advice = recommend([row("fp16", 3.0, True, mode="15W"), row("fp16", 2.0, True, mode="MAXN")])
    assert advice.candidate == "fp16@MAXN"
