"""On a real controller: a 1 MB zip of a 1 GiB member of zeros and a 7 MB tar.gz of a
million empty members took the API process from 190 MB to 2.2 GB (27.5 s of CPU), because every
member was read into memory in the request thread. Both are now refused with a 400 naming the rule
(a member packed over 200 to 1, more than 10,000 entries) before anything is unpacked, and the
process grows by a few MB. Zips written by ``ZipFile.writestr`` push; an encrypted zip is a 400
naming the member, not a 500 (N12)."""

from __future__ import annotations

import io
import stat
import tarfile
import threading
import uuid
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
import onnx
import pytest

from controller.demo.sample_models import classifier
from controller.server import Controller
from tests.integration.hardening.conftest import open_controller

GROWTH = 200 << 20


@pytest.fixture
def controller(mosquitto: str, tmp_path: Path) -> Iterator[Controller]:
    with open_controller(mosquitto, tmp_path, f"bombs-{uuid.uuid4().hex[:10]}/v1") as c:
        yield c


def resident() -> int:
    """This process's resident memory in bytes (the controller serves in it)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


@contextmanager
def growth() -> Iterator[list[int]]:
    """How far resident memory rose above where it was, sampled every 5 ms while the block ran
    (the one item of the list, set when the block ends)."""
    start = resident()
    peak = [start]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.005):
            peak[0] = max(peak[0], resident())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    grown = [0]
    try:
        yield grown
    finally:
        done.set()
        sampler.join()
        grown[0] = max(peak[0], resident()) - start


def zip_bomb() -> bytes:
    """One member of 1 GiB of zeros, deflated to about 1 MB, written a MiB at a time."""
    buffer = io.BytesIO()
    block = bytes(1 << 20)
    info = zipfile.ZipInfo("zeros.bin")
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (stat.S_IFREG | 0o644) << 16  # as zip(1) writes it
    with zipfile.ZipFile(buffer, "w") as archive, archive.open(info, "w") as member:
        for _ in range(1024):
            member.write(block)
    return buffer.getvalue()


def many_empty_members(count: int) -> bytes:
    """A tar.gz of ``count`` empty files ``m/0000000``…, the headers made with numpy (tarfile
    takes a minute for a million) and compressed as they are made (about 7 MB)."""
    template = bytearray(tarfile.TarInfo("m/0000000").tobuf(format=tarfile.USTAR_FORMAT))
    template[148:156] = b" " * 8  # the checksum is summed with its own field as spaces
    base = np.frombuffer(bytes(template), np.uint8)
    digits, octal = 10 ** np.arange(6, -1, -1), 8 ** np.arange(5, -1, -1)
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)
    parts = []
    for start in range(0, count, 10_000):
        ids = np.arange(start, min(start + 10_000, count))
        blocks = np.tile(base, (len(ids), 1))
        blocks[:, 2:9] = (ids[:, None] // digits) % 10 + ord("0")
        checksum = blocks.sum(axis=1, dtype=np.int64)
        blocks[:, 148:154] = (checksum[:, None] // octal) % 8 + ord("0")
        blocks[:, 154] = 0
        parts.append(packer.compress(blocks.tobytes()))
    parts.append(packer.compress(bytes(2 * tarfile.BLOCKSIZE)) + packer.flush())
    return b"".join(parts)


def model_zip(folder: Path, writestr: bool) -> bytes:
    """The classifier with its weights in ``weights.bin``, zipped as zip(1) does (regular files)
    or, with ``writestr``, by ``ZipFile.writestr`` (permission bits, no file type)."""
    onnx.save_model(
        onnx.load_model_from_string(classifier(seed=3)),
        str(folder / "model.onnx"),
        save_as_external_data=True,
        location="weights.bin",
        size_threshold=0,
    )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in ("model.onnx", "weights.bin"):
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            if not writestr:
                info.external_attr = (stat.S_IFREG | 0o644) << 16
            archive.writestr(name if writestr else info, (folder / name).read_bytes())
    return buffer.getvalue()


def assert_refused(api: httpx.Client, response: httpx.Response, *words: str) -> None:
    assert response.status_code == 400, response.text
    detail = response.json()["detail"]
    assert detail.startswith("archive refused: "), detail
    for word in words:
        assert word in detail, detail
    assert api.get("/api/v1/models/bomb").status_code == 404


def test_a_zip_of_a_1_gib_member_is_refused_from_its_header(api: httpx.Client) -> None:
    bomb = zip_bomb()
    assert len(bomb) < 2 << 20

    with growth() as grown:
        pushed = api.put("/api/v1/models/bomb/versions/1", content=bomb)

    assert grown[0] < GROWTH, f"the controller grew by {grown[0]:,} bytes"
    assert_refused(api, pushed, "'zeros.bin' would unpack to 1,073,741,824 bytes", "bomb")


def test_a_tar_gz_of_a_million_empty_members_is_refused_at_the_cap(api: httpx.Client) -> None:
    archive = many_empty_members(1_000_000)

    with growth() as grown:
        pushed = api.put("/api/v1/models/bomb/versions/1", content=archive)

    assert grown[0] < GROWTH, f"the controller grew by {grown[0]:,} bytes"
    assert_refused(api, pushed, "more than 10,000 entries", "at most 10,000 are accepted")


def test_a_zip_written_by_writestr_pushes(api: httpx.Client, tmp_path: Path) -> None:
    pushed = api.put("/api/v1/models/cls/versions/1", content=model_zip(tmp_path, writestr=True))

    assert pushed.status_code == 201, pushed.text
    assert [i["name"] for i in pushed.json()["inputs"]] == ["image"]


def encrypted(archive: bytes, member: str) -> bytes:
    """``archive`` with ``member``'s encrypted flag (bit 0) set in both its headers."""
    out = bytearray(archive)
    with zipfile.ZipFile(io.BytesIO(archive)) as written:
        out[written.getinfo(member).header_offset + 6] |= 0x1
        central = written.start_dir
    while archive[central + 46 : central + 46 + len(member)] != member.encode():
        central = archive.index(b"PK\x01\x02", central + 4)
    out[central + 8] |= 0x1
    return bytes(out)


def test_an_encrypted_zip_is_a_400_naming_the_member(api: httpx.Client, tmp_path: Path) -> None:
    archive = encrypted(model_zip(tmp_path, writestr=False), "weights.bin")

    pushed = api.put("/api/v1/models/bomb/versions/1", content=archive)

    assert_refused(api, pushed, "'weights.bin' is encrypted")
