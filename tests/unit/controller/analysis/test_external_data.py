"""Models with external data (issue 16 item 7): an archive of a .onnx and its data files becomes one
self-contained model equal in ONNX Runtime to the original; archives that reach outside themselves,
links, lies about sizes and missing data are refused with the reason; a bare .onnx whose data is
elsewhere is refused at upload with what to push instead."""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from controller.analysis.external_data import (
    ArchiveError,
    external_locations,
    inline_archive,
    is_archive,
)
from controller.analysis.onnx_inspect import inspect_model
from controller.errors import InvalidModel
from tests.hidden_tensors import HIDING_PLACES, LENGTH, in_function

LIMIT = 64 << 20


def model_with_external_data(folder: Path, location: str = "weights.bin") -> onnx.ModelProto:
    """A small MLP saved as ``folder/model.onnx`` with every weight in ``folder/<location>``."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((16, 4)).astype(np.float32), "w2")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w1"], ["h"]),
            helper.make_node("Relu", ["h"], ["r"]),
            helper.make_node("MatMul", ["r", "w2"], ["y"]),
        ],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [w1, w2],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    (folder / location).parent.mkdir(parents=True, exist_ok=True)
    reference = onnx.ModelProto()
    reference.CopyFrom(model)
    onnx.save_model(
        model,
        str(folder / "model.onnx"),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=location,
        size_threshold=0,
    )
    return reference


def tar_of(folder: Path, gz: bool = True, prefix: str = "export") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz" if gz else "w") as tar:
        for path in sorted(folder.rglob("*")):
            tar.add(path, arcname=f"{prefix}/{path.relative_to(folder)}", recursive=False)
    return buffer.getvalue()


def zip_of(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(folder.rglob("*")):
            archive.write(path, path.relative_to(folder).as_posix())
    return buffer.getvalue()


def run(model: bytes | onnx.ModelProto) -> np.ndarray:
    data = model if isinstance(model, bytes) else model.SerializeToString()
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8)
    result: np.ndarray = session.run(None, {"x": x})[0]
    return result


@pytest.mark.parametrize("pack", ["tar.gz", "tar", "zip"])
def test_an_archive_becomes_one_model_equal_to_the_original(tmp_path: Path, pack: str) -> None:
    original = model_with_external_data(tmp_path / "m")
    archive = {"tar.gz": tar_of(tmp_path / "m"), "tar": tar_of(tmp_path / "m", gz=False),
               "zip": zip_of(tmp_path / "m")}[pack]  # fmt: skip
    assert is_archive(archive)
    inlined = inline_archive(archive, LIMIT)
    assert external_locations(onnx.load_model_from_string(inlined)) == []
    np.testing.assert_array_equal(run(inlined), run(original))


def test_data_in_a_subfolder_beside_the_model_is_found(tmp_path: Path) -> None:
    original = model_with_external_data(tmp_path / "m", location="data/weights.bin")
    np.testing.assert_array_equal(run(inline_archive(zip_of(tmp_path / "m"), LIMIT)), run(original))


def member_archive(members: list[tarfile.TarInfo], payloads: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info in members:
            data = payloads.get(info.name)
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("name", "kind", "words"),
    [
        ("../evil.onnx", tarfile.REGTYPE, "outside the archive"),
        ("/etc/model.onnx", tarfile.REGTYPE, "absolute path"),
        ("weights.bin", tarfile.SYMTYPE, "link"),
        ("weights.bin", tarfile.LNKTYPE, "link"),
        ("fifo", tarfile.FIFOTYPE, "special file"),
    ],
)
def test_members_outside_the_archive_and_links_are_refused(
    name: str, kind: bytes, words: str
) -> None:
    info = tarfile.TarInfo(name)
    info.type = kind
    if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
        info.linkname = "/etc/passwd"
    payload = {name: b"x"} if kind == tarfile.REGTYPE else {}
    with pytest.raises(ArchiveError, match=words):
        inline_archive(member_archive([info], payload), LIMIT)


def test_a_zip_symlink_is_refused(tmp_path: Path) -> None:
    model_with_external_data(tmp_path / "m")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.write(tmp_path / "m" / "model.onnx", "model.onnx")
        link = zipfile.ZipInfo("weights.bin")
        link.external_attr = 0o120777 << 16  # S_IFLNK
        archive.writestr(link, "/etc/passwd")
    with pytest.raises(ArchiveError, match="not a regular file"):
        inline_archive(buffer.getvalue(), LIMIT)


def test_a_tensor_pointing_outside_the_models_folder_is_refused(tmp_path: Path) -> None:
    model_with_external_data(tmp_path / "m")
    model = onnx.load(str(tmp_path / "m" / "model.onnx"), load_external_data=False)
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = "../../etc/passwd"
    (tmp_path / "m" / "model.onnx").write_bytes(model.SerializeToString())
    with pytest.raises(ArchiveError, match="outside the model's folder"):
        inline_archive(tar_of(tmp_path / "m"), LIMIT)


def test_missing_data_file_and_reads_past_its_end_are_named(tmp_path: Path) -> None:
    model_with_external_data(tmp_path / "m")
    weights = tmp_path / "m" / "weights.bin"
    data = weights.read_bytes()
    weights.unlink()
    with pytest.raises(ArchiveError, match=r"'weights\.bin', which the archive lacks"):
        inline_archive(tar_of(tmp_path / "m"), LIMIT)
    weights.write_bytes(data[:10])
    with pytest.raises(ArchiveError, match="which has 10"):
        inline_archive(tar_of(tmp_path / "m"), LIMIT)


def test_none_or_two_models_and_oversize_archives_are_refused(tmp_path: Path) -> None:
    model_with_external_data(tmp_path / "m")
    (tmp_path / "m" / "second.onnx").write_bytes((tmp_path / "m" / "model.onnx").read_bytes())
    with pytest.raises(ArchiveError, match=r"exactly one \.onnx file"):
        inline_archive(tar_of(tmp_path / "m"), LIMIT)
    (tmp_path / "m" / "second.onnx").unlink()
    with pytest.raises(ArchiveError, match="more than 100 bytes"):
        inline_archive(tar_of(tmp_path / "m"), 100)
    with pytest.raises(ArchiveError, match="not a readable"):
        inline_archive(b"\x1f\x8b" + bytes(300), LIMIT)


def test_a_bare_onnx_with_external_data_is_refused_naming_what_to_push(tmp_path: Path) -> None:
    model_with_external_data(tmp_path / "m")
    with pytest.raises(InvalidModel, match=r"weights\.bin.*archive") as refused:
        inspect_model(tmp_path / "m" / "model.onnx")
    assert "save_as_external_data=False" in str(refused.value)


@pytest.mark.parametrize("place", sorted(HIDING_PLACES))
def test_a_file_named_anywhere_in_the_model_is_refused_at_upload(
    tmp_path: Path, place: str
) -> None:
    """Issue 29 N1: ONNX Runtime reads a file named by a tensor in a function, a function's
    attribute default, a subgraph inside a function or a sparse attribute (the probe read the
    controller's admin token so); every one is refused before anything runs the model."""
    path = tmp_path / "model.onnx"
    path.write_bytes(HIDING_PLACES[place]("ctl/admin-token").SerializeToString())
    with pytest.raises(InvalidModel, match=r"ctl/admin-token") as refused:
        inspect_model(path)
    assert "archive" in str(refused.value)


def test_an_archive_inlines_the_data_of_a_functions_tensor(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "model.onnx").write_bytes(in_function("data/leak.bin").SerializeToString())
    (folder / "data").mkdir()
    payload = bytes(range(100, 100 + LENGTH))
    (folder / "data" / "leak.bin").write_bytes(payload)

    inlined = inline_archive(tar_of(folder), LIMIT)

    assert external_locations(onnx.load_model_from_string(inlined)) == []
    session = ort.InferenceSession(inlined, providers=["CPUExecutionProvider"])
    out = session.run(None, {"x": np.zeros(LENGTH, np.float32)})[0]
    assert bytes(out.astype(np.uint8)) == payload
