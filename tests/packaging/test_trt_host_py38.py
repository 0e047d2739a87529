"""agent/trt_host runs under JetPack 5.1's Python 3.8: every file parses as 3.8 and imports only
the standard library, numpy, tensorrt and its own package."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

HOST = Path(__file__).resolve().parents[2] / "agent" / "trt_host"
ALLOWED = {"numpy", "tensorrt", "__future__"}
# The transport's CPU mode: ONNX Runtime, imported lazily in that mode only.
EXTRA = {"backend_ort.py": {"onnxruntime"}}
FILES = sorted(HOST.glob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_parses_as_python_3_8(path: Path) -> None:
    ast.parse(path.read_text(), str(path), feature_version=(3, 8))


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_imports_only_stdlib_numpy_tensorrt_and_itself(path: Path) -> None:
    allowed = ALLOWED | EXTRA.get(path.name, set()) | set(sys.stdlib_module_names)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    assert found <= allowed, f"{path.name} imports {sorted(found - allowed)}"


def test_no_runtime_annotations_newer_than_3_8() -> None:
    """Annotations are only safe as strings: every module defers them."""
    for path in FILES:
        tree = ast.parse(path.read_text())
        annotated = any(
            isinstance(node, ast.AnnAssign)
            or (isinstance(node, ast.FunctionDef) and (node.returns or node.args.args[:1]))
            for node in ast.walk(tree)
        )
        future = any(
            isinstance(node, ast.ImportFrom) and node.module == "__future__" for node in tree.body
        )
        assert future or not annotated, path.name
