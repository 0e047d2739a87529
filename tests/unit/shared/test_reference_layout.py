"""The reference NPZ is judged from its ZIP directory and .npy headers before any array is
loaded: no unpickling, no inflating past the cap, and errors that say what is wrong."""

from __future__ import annotations

import io
import re
import tracemalloc
import zipfile

import numpy as np
import pytest

from agent.swap.validation import BadReference, parse_reference
from controller.analysis.reference_outputs import ReferenceOutputsError, check_npz, reference_npz
from controller.demo.sample_models import classifier
from shared.reference_layout import (
    MAX_REFERENCE_BYTES,
    ExpectedTensor,
    ReferenceLayoutError,
    check_reference,
    read_layout,
)
from tests.npz_files import DETONATIONS, Detonator, Member, classifier_bomb, forged_npz, npz

IMAGE = ExpectedTensor("image", (1, 3, 32, 32), "float32")
PROBABILITIES = ExpectedTensor("probabilities", (1, 10), "float32")


def classifier_arrays(cases: int = 2) -> dict[str, np.ndarray]:
    return {
        "input:image": np.zeros((cases, 1, 3, 32, 32), np.float32),
        "output:probabilities": np.zeros((cases, 1, 10), np.float32),
    }


def refusal(data: bytes, max_bytes: int = MAX_REFERENCE_BYTES) -> str:
    with pytest.raises(ReferenceLayoutError) as caught:
        check_reference(data, [IMAGE], [PROBABILITIES], max_bytes)
    return str(caught.value)


def test_the_computed_reference_fits_its_model() -> None:
    data = reference_npz(classifier())
    layout = check_reference(data, [IMAGE], [PROBABILITIES])
    assert layout.cases() == 4
    assert layout.arrays["input:image"].shape == (4, 1, 3, 32, 32)
    check_npz(classifier(), data)


def test_a_computed_reference_holds_fewer_cases_rather_than_pass_the_cap() -> None:
    data = reference_npz(classifier(), cases=4, max_bytes=40_000)
    assert read_layout(data, max_bytes=40_000).cases() == 2
    with pytest.raises(ReferenceOutputsError, match="takes 12328 bytes, over the 9000 bytes cap"):
        reference_npz(classifier(), max_bytes=9000)


def test_a_body_that_is_not_a_zip_says_so_not_pickled_data() -> None:
    assert refusal(b"just some text, not numpy at all").startswith("not a ZIP/NPZ file: ")
    single = io.BytesIO()
    np.save(single, np.zeros(3, np.float32))
    assert refusal(single.getvalue()).startswith("not a ZIP/NPZ file (a single .npy array)")


def test_an_object_array_is_refused_without_being_unpickled() -> None:
    arrays = classifier_arrays() | {"output:probabilities": np.array([Detonator()] * 2)}
    data = npz(arrays)
    assert refusal(data) == (
        "array output:probabilities has dtype object: only numeric arrays (bool, int, uint, "
        "float, complex) are accepted"
    )
    with pytest.raises(BadReference, match="dtype object"):
        parse_reference(data)
    assert DETONATIONS == []
    np.load(io.BytesIO(data), allow_pickle=True)["output:probabilities"]
    assert DETONATIONS == ["unpickled"], "the control: numpy with allow_pickle unpickles it"
    DETONATIONS.clear()


@pytest.mark.parametrize(
    ("descr", "shown"),
    [
        ([("a", "<f4"), ("b", "<i4")], "void64"),
        ("|V8", "void64"),
        ("<U4", "str128"),
        ("|S4", "bytes32"),
        ("<M8[s]", "datetime64[s]"),
    ],
)
def test_structured_void_string_and_datetime_arrays_are_refused(
    descr: str | list[tuple[str, str]], shown: str
) -> None:
    data = forged_npz([Member("input:image.npy", (2, 1, 3, 32, 32), descr)])
    with pytest.raises(ReferenceLayoutError) as caught:
        read_layout(data)
    assert str(caught.value).startswith(f"array input:image has dtype {shown}: only numeric")


def test_a_wrong_shape_names_the_array_and_the_shape_the_model_expects() -> None:
    arrays = classifier_arrays() | {"input:image": np.zeros((1, 3, 10, 10), np.float32)}
    assert refusal(npz(arrays)).startswith(
        "array input:image has shape (1,3,10,10), model expects (N,1,3,32,32): first axis = case"
    )


def test_dynamic_dims_take_any_size_from_one_and_the_case_axis_comes_first() -> None:
    dynamic = ExpectedTensor("tokens", ("batch", None, 8), "int64")
    check_reference(npz({"input:tokens": np.zeros((3, 2, 17, 8), np.int64)}), [dynamic], [])
    without_case_axis = npz({"input:tokens": np.zeros((2, 17, 8), np.int64)})
    with pytest.raises(ReferenceLayoutError, match=r"model expects \(N,batch,\?,8\)"):
        check_reference(without_case_axis, [dynamic], [])
    empty_dim = npz({"input:tokens": np.zeros((3, 2, 0, 8), np.int64)})
    with pytest.raises(ReferenceLayoutError, match=r"has shape \(3,2,0,8\)"):
        check_reference(empty_dim, [dynamic], [])


def test_a_wrong_dtype_names_both_dtypes() -> None:
    arrays = classifier_arrays() | {"input:image": np.zeros((2, 1, 3, 32, 32), np.float64)}
    assert refusal(npz(arrays)) == "array input:image has dtype float64, model expects float32"
    big_endian = classifier_arrays() | {"input:image": np.zeros((2, 1, 3, 32, 32), ">f4")}
    assert refusal(npz(big_endian)) == "array input:image has dtype >f4, model expects float32"


def test_missing_and_extra_arrays_are_both_named() -> None:
    arrays = classifier_arrays()
    arrays["input:img"] = arrays.pop("input:image")
    assert refusal(npz(arrays)).startswith(
        "reference NPZ lacks input:image; has arrays the model has no tensor for: input:img"
    )


def test_members_that_are_not_named_arrays_or_appear_twice_are_refused() -> None:
    extra = forged_npz([Member("input:image.npy", (2, 1, 3, 32, 32)), Member("notes", (1,))])
    assert refusal(extra).startswith(
        "reference NPZ lacks output:probabilities; has arrays the model has no tensor for: notes"
    )
    with pytest.raises(ReferenceLayoutError, match=r"^unknown member\(s\) notes: a reference NPZ"):
        read_layout(extra)
    twice = forged_npz([Member("input:image.npy", (2, 1, 3, 32, 32))] * 2)
    assert refusal(twice) == "member(s) input:image.npy appear more than once"


def test_the_uncompressed_total_is_capped_from_the_zip_directory() -> None:
    data = npz(classifier_arrays(cases=3))
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        total = sum(m.file_size for m in archive.infolist())
    assert refusal(data, max_bytes=total - 1) == (
        f"uncompressed size {total} bytes exceeds the {total - 1} bytes cap of reference "
        "outputs: use fewer cases"
    )
    read_layout(data, max_bytes=total)


def test_a_zip_bomb_is_refused_before_anything_is_inflated() -> None:
    bomb = classifier_bomb()
    assert len(bomb) < 1_000_000
    tracemalloc.start()
    try:
        with pytest.raises(BadReference) as caught:
            parse_reference(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "uncompressed size 293.9 MiB exceeds the 256 MiB cap" in str(caught.value)
    assert peak < 8 * 2**20, f"{peak / 2**20:.0f} MiB allocated"
    with pytest.raises(ReferenceOutputsError, match="exceeds the 256 MiB cap"):
        check_npz(classifier(), bomb)


def test_a_header_that_declares_more_than_the_member_holds_is_refused() -> None:
    lying = forged_npz(
        [
            Member("input:image.npy", (10**9, 1, 3, 32, 32), data_bytes=64),
            Member("output:probabilities.npy", (10**9, 1, 10), data_bytes=64),
        ]
    )
    assert re.fullmatch(
        r"member input:image.npy holds \d{3} bytes but its header declares 12288000000\d{3} "
        r"\(shape \(1000000000,1,3,32,32\) of float32\): the file is damaged or forged",
        refusal(lying),
    )
    with pytest.raises(BadReference, match="header declares"):
        parse_reference(lying)


def test_arrays_must_agree_on_a_case_count_of_at_least_one() -> None:
    disagree = classifier_arrays() | {"output:probabilities": np.zeros((3, 1, 10), np.float32)}
    assert refusal(npz(disagree)) == "arrays disagree on the number of cases (first axis): 2, 3"
    assert refusal(npz(classifier_arrays(cases=0))).startswith("the arrays hold no case")
    with pytest.raises(BadReference, match="array input:image has no case axis"):
        parse_reference(npz({"input:image": np.float32(1.0), "output:p": np.zeros(1)}))


def test_a_damaged_member_passes_the_headers_but_not_the_data_check() -> None:
    data = npz({"output:probabilities": np.full((2, 100_000), 7, np.uint8)})
    last = data.rfind(b"\x07" * 20)
    damaged = data[:last] + b"\x08" * 20 + data[last + 20 :]
    read_layout(damaged).cases()
    with pytest.raises(ReferenceLayoutError, match=r"^member output:probabilities\.npy is corrupt"):
        check_reference(damaged, [], [ExpectedTensor("probabilities", (100_000,), "uint8")])


def test_an_encrypted_or_odd_member_is_refused_not_crashed_on() -> None:
    data = bytearray(forged_npz([Member("input:image.npy", (2, 1, 3, 32, 32))]))
    local, central = data.find(b"PK\x03\x04"), data.find(b"PK\x01\x02")
    data[local + 6] |= 1  # general purpose flag bit 0: encrypted
    data[central + 8] |= 1
    with pytest.raises(ReferenceLayoutError, match="cannot be read"):
        read_layout(bytes(data))
    assert zipfile.is_zipfile(io.BytesIO(bytes(data)))
