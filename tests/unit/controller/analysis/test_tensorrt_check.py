"""The TensorRT parser as ground truth: version families, disagreements, and the real parser."""

from __future__ import annotations

import importlib.util

import pytest

from controller.analysis import analyze
from controller.analysis.tensorrt_check import ParserVerdict, compare, version_family
from tests.analysis_models import chain_with_cpu_op_in_middle


@pytest.mark.parametrize(
    ("version", "family"),
    [
        ("8.5.2.2", "8.5"),
        ("8.6.1", "8.6"),
        ("10.3.0", "10.1"),
        ("10.16.1", "10.1"),
        ("8.4.1", None),
    ],
)
def test_installed_versions_map_to_table_columns(version: str, family: str | None) -> None:
    assert version_family(version) == family


def test_nodes_judged_differently_are_listed() -> None:
    verdict = ParserVerdict("10.3.0", ((True, (0, 1)), (False, (2,)), (True, (3,))))
    static = {0: True, 1: True, 2: True, 3: False}
    found = compare(static, {0: "Conv", 1: "Relu", 2: "Resize", 3: "Fancy"}, verdict)
    assert [(d.index, d.op_type, d.static_supported, d.tensorrt_supported) for d in found] == [
        (2, "Resize", True, False),
        (3, "Fancy", False, True),
    ]


@pytest.mark.tensorrt
@pytest.mark.skipif(
    importlib.util.find_spec("tensorrt") is None,
    reason="TensorRT's Python package is not installed",
)
def test_the_real_parser_agrees_on_a_custom_op_in_the_middle() -> None:
    import tensorrt

    family = version_family(tensorrt.__version__)
    assert family is not None
    report = analyze(chain_with_cpu_op_in_middle(), family)
    assert report.tensorrt.checked
    assert [d.index for d in report.tensorrt.disagreements] == []
    assert sorted(report.tensorrt.supported_subgraphs) == [[0, 1], [3, 4]]
