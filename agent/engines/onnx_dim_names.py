"""Give dynamic dimensions names TensorRT will not mistake for one another (pure, no onnx).

Why: TensorRT's ONNX parser treats dimensions with equal ``dim_param`` strings as one dimension.
Exporters write ``"?"`` (or an empty name) for every unknown dimension (PaddleOCR does), so an
input ``[?, 3, ?, ?]`` with the profile shape ``(1, 3, 48, 192)`` is refused: "Input dimensions
with this name are inconsistent". :func:`rename_dim_params` renames, in the top-level graph's
inputs, outputs and value_info:

- every anonymous ``dim_param`` (``"?"``, empty or blank) to a name of its own,
  ``{tensor}__dim{axis}``;
- a name several input axes share when a given profile shape gives those axes different sizes
  (each axis gets a name of its own). Names every profile keeps equal stay: they tell TensorRT
  the dimensions are equal, which it uses to optimise.

Renaming only removes equality hints: it never changes what the model computes. Every byte
other than the renamed ``dim_param`` strings (and the lengths around them) is copied unchanged.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from agent.engines.onnx_qdq_fold import GraphSpan, len_field
from agent.trt_host.protobuf_wire import LEN, VARINT, WireError, fields, varint

__all__ = ["WireError", "rename_dim_params"]

Profile = Mapping[str, Sequence[int]]

_GRAPH_INPUT, _GRAPH_OUTPUT, _GRAPH_VALUE_INFO = 11, 12, 13
_SECTIONS = {_GRAPH_INPUT: "input", _GRAPH_OUTPUT: "output", _GRAPH_VALUE_INFO: "value_info"}
_VALUE_INFO_NAME, _VALUE_INFO_TYPE = 1, 2
_TYPE_TENSOR, _TENSOR_SHAPE, _SHAPE_DIM = 1, 2, 1
_DIM_VALUE, _DIM_PARAM = 1, 2


@dataclass(frozen=True)
class _Axis:
    entry: int  # where the ValueInfoProto field starts in the graph
    section: int
    tensor: bytes
    axis: int
    rank: int
    value: int | None
    param: bytes | None


def _submessages(data: memoryview, number: int) -> list[memoryview]:
    return [data[p:e] for n, w, _, p, e in fields(data) if n == number and w == LEN]


def _dims(value_info: memoryview) -> list[memoryview]:
    return [
        dim
        for kind in _submessages(value_info, _VALUE_INFO_TYPE)
        for tensor in _submessages(kind, _TYPE_TENSOR)
        for shape in _submessages(tensor, _TENSOR_SHAPE)
        for dim in _submessages(shape, _SHAPE_DIM)
    ]


def _axes(entry: int, section: int, value_info: memoryview) -> list[_Axis]:
    names = [bytes(name) for name in _submessages(value_info, _VALUE_INFO_NAME)]
    tensor = names[-1] if names else b""
    dims = _dims(value_info)
    found = []
    for axis, dim in enumerate(dims):
        value: int | None = None
        param: bytes | None = None
        for number, wire, _, payload, end in fields(dim):
            if number == _DIM_VALUE and wire == VARINT:
                value, param = varint(dim, payload)[0], None
            elif number == _DIM_PARAM and wire == LEN:
                value, param = None, bytes(dim[payload:end])
        found.append(_Axis(entry, section, tensor, axis, len(dims), value, param))
    return found


def _anonymous(param: bytes | None) -> bool:
    return param is not None and param.strip() in (b"", b"?")


def _size(axis: _Axis, profile: Profile) -> int | None:
    shape = profile.get(axis.tensor.decode("utf-8", "replace"))
    return None if shape is None or len(shape) != axis.rank else int(shape[axis.axis])


def _conflicts(axes: list[_Axis], profiles: Sequence[Profile]) -> dict[bytes, list[int]]:
    """Names shared by input axes that a profile gives different sizes → those sizes."""
    shared: dict[bytes, list[_Axis]] = defaultdict(list)
    for axis in axes:
        if axis.section == _GRAPH_INPUT and axis.param is not None and not _anonymous(axis.param):
            shared[axis.param].append(axis)
    found = {}
    for name, members in shared.items():
        for profile in profiles:
            sizes = {s for s in (_size(a, profile) for a in members) if s is not None}
            if len(members) > 1 and len(sizes) > 1:
                found[name] = sorted(sizes)
                break
    return found


def _edit(message: memoryview, number: int, edit: Callable[[memoryview], bytes]) -> bytes:
    """``message`` with each length-delimited field ``number`` replaced by ``edit(payload)``."""
    return b"".join(
        len_field(n, edit(message[p:e])) if n == number and w == LEN else message[s:e]
        for n, w, s, p, e in fields(message)
    )


def _renamed(value_info: memoryview, names: dict[int, bytes]) -> bytes:
    """``value_info`` with the dim_param of each axis in ``names`` replaced."""

    def shape(data: memoryview) -> bytes:
        pieces: list[bytes | memoryview] = []
        axis = 0
        for n, w, s, p, e in fields(data):
            is_dim = n == _SHAPE_DIM and w == LEN
            new = names.get(axis) if is_dim else None
            pieces.append(data[s:e] if new is None else len_field(n, param(data[p:e], new)))
            axis += 1 if is_dim else 0
        return b"".join(pieces)

    def param(dim: memoryview, new: bytes) -> bytes:
        return _edit(dim, _DIM_PARAM, lambda _old: new)

    return _edit(
        value_info,
        _VALUE_INFO_TYPE,
        lambda kind: _edit(kind, _TYPE_TENSOR, lambda tensor: _edit(tensor, _TENSOR_SHAPE, shape)),
    )


def rename_dim_params(
    model: bytes, profile: Profile, *more_profiles: Profile
) -> tuple[bytes, list[str]]:
    """``model`` (serialized ModelProto) with anonymous dim_params, and names shared by input
    axes that ``profile`` (input name → concrete shape) gives different sizes, renamed; and one
    line per renamed axis (the same bytes and ``[]`` when nothing is renamed). A shared name is
    kept only when ``profile`` and each of ``more_profiles`` (e.g. min and max shapes) give its
    axes one size.

    WireError when the bytes are not a protobuf ONNX model."""
    try:
        return _rename(model, [profile, *more_profiles])
    except WireError as exc:
        raise WireError(f"cannot rename dimensions of this ONNX model: {exc}") from exc


def _rename(model: bytes, profiles: Sequence[Profile]) -> tuple[bytes, list[str]]:
    span = GraphSpan.of(model)
    graph = span.body
    axes: list[_Axis] = []
    for number, wire, start, payload, end in fields(graph):
        if number in _SECTIONS and wire == LEN:
            axes.extend(_axes(start, number, graph[payload:end]))
    conflicts = _conflicts(axes, profiles)
    taken = {axis.param for axis in axes if axis.param is not None}
    renames: dict[int, dict[int, bytes]] = defaultdict(dict)
    lines = []
    for axis in axes:
        conflict = axis.section == _GRAPH_INPUT and axis.param in conflicts
        if not (_anonymous(axis.param) or conflict):
            continue
        base = b"%s__dim%d" % (axis.tensor, axis.axis)
        new, suffix = base, 1
        while new in taken:
            suffix += 1
            new = b"%s_%d" % (base, suffix)
        taken.add(new)
        renames[axis.entry][axis.axis] = new
        old = (axis.param or b"").decode("utf-8", "replace")
        why = f" (the profile gives sizes {conflicts[axis.param or b'']})" if conflict else ""
        lines.append(
            f"{_SECTIONS[axis.section]} {axis.tensor.decode('utf-8', 'replace')!r} axis "
            f"{axis.axis}: {old!r} → {new.decode('utf-8', 'replace')!r}{why}"
        )
    if not renames:
        return model, []
    pieces = [
        len_field(n, _renamed(graph[p:e], renames[s])) if s in renames else graph[s:e]
        for n, _, s, p, e in fields(graph)
    ]
    return span.with_body(b"".join(pieces)), lines
