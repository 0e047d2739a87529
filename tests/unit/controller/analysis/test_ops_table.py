"""The operator table shipped in the package: what each TensorRT version's parser takes."""

from __future__ import annotations

import pytest

from controller.analysis.ops_table import load_ops_table, parse_ops_table


def test_the_shipped_table_knows_the_operators_of_a_cnn_in_every_version() -> None:
    table = load_ops_table()
    for op in ("Conv", "Relu", "Add", "Gemm", "MatMul", "GlobalAveragePool", "Clip"):
        entry = table.get(op)
        assert entry is not None
        assert all(entry.supported_in(v) for v in ("8.5", "8.6", "10.1")), op


def test_versions_differ_where_the_parser_grew() -> None:
    table = load_ops_table()
    hardmax, layer_norm, gelu = (
        table.get("Hardmax"),
        table.get("LayerNormalization"),
        table.get("Gelu"),
    )
    assert hardmax is not None
    assert layer_norm is not None
    assert gelu is not None
    assert (hardmax.supported_in("8.5"), hardmax.supported_in("10.1")) == (False, True)
    assert layer_norm.first_supported() == "8.6"
    assert not gelu.listed["8.5"]
    assert gelu.listed["10.1"]


def test_restrictions_and_types_of_10_1_are_kept() -> None:
    table = load_ops_table()
    resize, const_of_shape = table.get("Resize"), table.get("ConstantOfShape")
    assert resize is not None
    assert const_of_shape is not None
    assert "align_corners" in resize.restrictions
    assert "FP16" in resize.types
    assert "INT64" in const_of_shape.types  # the source writes INF64


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty"),
        ("op\ttrt8.5\n", "header"),
        (
            "op\ttrt8.5\ttrt8.6\ttrt10.1\ttypes_10.1\trestrictions_10.1\nFoo\tY\tmaybe\tY\t\t\n",
            "Y/N/-",
        ),
    ],
)
def test_a_broken_table_is_refused_with_the_reason(text: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        parse_ops_table(text)
