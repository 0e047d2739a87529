"""Models with external data: an archive of a .onnx and its data files becomes one
self-contained model equal in ONNX Runtime to the original; archives that reach outside themselves,
links, lies about sizes and missing data are refused with the reason; a bare .onnx whose data is
elsewhere is refused at upload with what to push instead."""

from __future__ import annotations

import gzip
import io
import stat
import struct
import tarfile
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from controller.analysis.archive_limits import ArchiveError
from controller.analysis.external_data import external_locations, inline_archive, is_archive
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
    """ONNX Runtime reads a file named by a tensor in a function, a function's
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


# Archive bombs: a 1 MB zip of a 1 GiB member and a tar.gz of a million
# empty members took the API process from 190 MB to 2.2 GB, because every member was read into
# memory; writestr zips were refused; encrypted, unknown-method and corrupt zips were a 500.


def model_files(folder: Path) -> tuple[onnx.ModelProto, dict[str, bytes]]:
    """The small MLP of :func:`model_with_external_data` and its two files by name."""
    original = model_with_external_data(folder)
    return original, {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def zip_with(
    files: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED, writestr: bool = False
) -> bytes:
    """A zip of ``files`` whose members say they are regular files (as ``zip`` writes them), or,
    with ``writestr``, as ``ZipFile.writestr(name, data)`` writes them: permission bits only."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=method) as archive:
        for name, data in files.items():
            if writestr:
                archive.writestr(name, data)
                continue
            info = zipfile.ZipInfo(name)
            info.compress_type = method
            kind = stat.S_IFDIR | 0o755 if name.endswith("/") else stat.S_IFREG | 0o644
            info.external_attr = kind << 16
            archive.writestr(info, data)
    return buffer.getvalue()


def tar_with(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def patch_zip(data: bytes, member: str, **fields: int) -> bytes:
    """``data`` with fields of ``member``'s central and local headers overwritten: ``flags``,
    ``method``, ``size`` (the unpacked size) or ``corrupt`` (bytes of its data flipped)."""
    out = bytearray(data)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        info = archive.getinfo(member)
        central = data.index(b"PK\x01\x02", archive.start_dir)
        while data[central + 46 : central + 46 + len(member)] != member.encode():
            central = data.index(b"PK\x01\x02", central + 4)
    local = info.header_offset
    places = {"flags": (8, 6, "<H"), "method": (10, 8, "<H"), "size": (24, 22, "<L")}
    for field, value in fields.items():
        if field == "corrupt":
            name_len, extra_len = struct.unpack_from("<2H", data, local + 26)
            start = local + 30 + name_len + extra_len + value
            for index in range(start, start + 32):
                out[index] ^= 0x5A
            continue
        in_central, in_local, fmt = places[field]
        struct.pack_into(fmt, out, central + in_central, value)
        struct.pack_into(fmt, out, local + in_local, value)
    return bytes(out)


@pytest.mark.parametrize("pack", ["tar.gz", "zip"])
def test_more_entries_than_the_cap_are_refused_while_the_headers_are_walked(
    tmp_path: Path, pack: str
) -> None:
    _, files = model_files(tmp_path / "m")
    empty = {f"junk/{n:05d}": b"" for n in range(10_001)}  # the cap is 10,000
    archive = tar_with(files | empty) if pack == "tar.gz" else zip_with(files | empty)

    with pytest.raises(ArchiveError, match="at most 10,000 are accepted") as refused:
        inline_archive(archive, LIMIT)

    count = "holds 10,003 entries" if pack == "zip" else "holds more than 10,000 entries"
    assert count in str(refused.value)


def test_an_unreferenced_member_that_would_unpack_200_times_its_size_is_refused_unread(
    tmp_path: Path,
) -> None:
    """What a user notices: a member packed over 200 to 1 (and over 64 MiB unpacked) is refused
    by name from its header alone, even when the model does not use it; so is a zip member whose
    header claims 1 GiB of 1 KB (nothing of it is inflated: its data is corrupt too)."""
    _, files = model_files(tmp_path / "m")
    with pytest.raises(ArchiveError, match=r"'junk\.bin' would unpack to 104,857,600 bytes"):
        inline_archive(tar_with(files | {"junk.bin": bytes(100 << 20)}), 1 << 30)

    lying = patch_zip(zip_with(files | {"junk.bin": bytes(1 << 20)}), "junk.bin", size=1 << 30)
    lying = patch_zip(lying, "junk.bin", corrupt=4)
    with pytest.raises(ArchiveError, match=r"'junk\.bin' would unpack to 1,073,741,824") as bomb:
        inline_archive(lying, 2 << 30)
    assert "decompression bomb" in str(bomb.value)


def test_members_that_together_unpack_over_200_times_the_archive_are_refused(
    tmp_path: Path,
) -> None:
    _, files = model_files(tmp_path / "m")
    junk = {f"junk{n}.bin": bytes(2 << 20) for n in range(40)}  # each under 64 MiB
    with pytest.raises(ArchiveError, match="the archive would unpack to more than 67,108,864"):
        inline_archive(tar_with(files | junk), 1 << 30)


def test_a_member_the_model_does_not_point_at_is_never_read(tmp_path: Path) -> None:
    original, files = model_files(tmp_path / "m")
    archive = zip_with(files | {"notes.txt": bytes(range(256)) * 64})
    broken = patch_zip(archive, "notes.txt", corrupt=2)

    np.testing.assert_array_equal(run(inline_archive(broken, LIMIT)), run(original))


@pytest.mark.parametrize(
    "method",
    [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA],
    ids=["stored", "deflate", "bzip2", "lzma"],
)
def test_a_zip_written_by_writestr_is_accepted(tmp_path: Path, method: int) -> None:
    """``ZipFile.writestr`` gives its members permission bits but no file type: regular files."""
    original, files = model_files(tmp_path / "m")
    archive = zip_with(
        {"export/": b""} | {f"export/{n}": d for n, d in files.items()}, method, writestr=True
    )
    with zipfile.ZipFile(io.BytesIO(archive)) as written:
        assert written.getinfo("export/weights.bin").external_attr >> 16 == 0o600

    np.testing.assert_array_equal(run(inline_archive(archive, LIMIT)), run(original))


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"flags": 0x1}, r"'weights\.bin' is encrypted"),
        ({"flags": 0x41}, r"'weights\.bin' is encrypted"),
        ({"method": 99}, r"'weights\.bin' is encrypted"),  # WinZip AES
        ({"method": 93}, r"'weights\.bin' uses compression method 93 \(Zstandard\)"),
        ({"method": 77}, r"'weights\.bin' uses compression method 77 \(unknown\)"),
    ],
)
def test_encrypted_members_and_unknown_methods_are_refused_by_name(
    tmp_path: Path, fields: dict[str, int], words: str
) -> None:
    _, files = model_files(tmp_path / "m")
    with pytest.raises(ArchiveError, match=words):
        inline_archive(patch_zip(zip_with(files), "weights.bin", **fields), LIMIT)


@pytest.mark.parametrize(
    "method",
    [zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA],
    ids=["deflate", "bzip2", "lzma"],
)
def test_a_corrupt_zip_member_is_refused_by_name(tmp_path: Path, method: int) -> None:
    _, files = model_files(tmp_path / "m")
    broken = patch_zip(zip_with(files, method), "weights.bin", corrupt=12)
    with pytest.raises(ArchiveError, match=r"archive member 'weights\.bin' is corrupt: \w"):
        inline_archive(broken, LIMIT)


@pytest.mark.parametrize("method", [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA], ids=["bzip2", "lzma"])
def test_a_zip_member_longer_than_its_header_says_is_refused_in_bounded_memory(
    tmp_path: Path, method: int
) -> None:
    """zipfile hands a bzip2 or LZMA decoder whole blocks of input and keeps all they unpack to;
    the member is decoded here in bounded steps and refused once it passes its size."""
    _, files = model_files(tmp_path / "m")
    real = len(files["weights.bin"])
    padded = files | {"weights.bin": files["weights.bin"] + bytes(128 << 20)}
    lying = patch_zip(zip_with(padded, method), "weights.bin", size=real)
    tracemalloc.start()
    try:
        with pytest.raises(ArchiveError) as refused:
            inline_archive(lying, LIMIT)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"{peak:,} bytes"
    assert "'weights.bin' is larger than its header says" in str(refused.value)


def test_tar_header_records_are_bounded() -> None:
    pax = tarfile.TarInfo("model.onnx")
    pax.pax_headers = {"comment": "x" * (1 << 20)}
    archive = gzip.compress(pax.tobuf(format=tarfile.PAX_FORMAT) + bytes(1024))
    with pytest.raises(ArchiveError, match="header record of 1,049,088 bytes"):
        inline_archive(archive, LIMIT)


def test_an_archive_file_is_read_from_disk_and_tensors_sharing_bytes_each_get_theirs(
    tmp_path: Path,
) -> None:
    """The controller hands the upload's path (the archive is not read into memory); each data
    member is read once, front to back, overlapping ranges included."""
    model_with_external_data(tmp_path / "m")
    model = onnx.load(str(tmp_path / "m" / "model.onnx"), load_external_data=False)
    weights = (tmp_path / "m" / "weights.bin").read_bytes()
    w2 = next(t for t in model.graph.initializer if t.name == "w2")
    for entry in w2.external_data:  # w2 (16x4) now reads the middle of w1's bytes (8x16)
        if entry.key == "offset":
            entry.value = "128"
    (tmp_path / "m" / "model.onnx").write_bytes(model.SerializeToString())
    path = tmp_path / "m.tar.gz"
    path.write_bytes(tar_of(tmp_path / "m"))

    inlined = onnx.load_model_from_string(inline_archive(path, LIMIT))

    arrays = {t.name: numpy_helper.to_array(t) for t in inlined.graph.initializer}
    np.testing.assert_array_equal(arrays["w1"], np.frombuffer(weights[:512], "<f4").reshape(8, 16))
    np.testing.assert_array_equal(
        arrays["w2"], np.frombuffer(weights[128:384], "<f4").reshape(16, 4)
    )
