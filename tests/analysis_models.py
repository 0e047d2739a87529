"""ONNX graphs built in code for the delegate analyzer's tests, with answers known by hand."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
CUSTOM_DOMAIN = "com.example"


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto],
    initializers: Sequence[onnx.TensorProto] = (),
    value_info: Sequence[onnx.ValueInfoProto] = (),
    opset: int = OPSET,
) -> bytes:
    """Serialized model; a custom-domain opset is declared when a node uses one."""
    graph = helper.make_graph(
        list(nodes), "test", list(inputs), list(outputs), list(initializers), value_info=value_info
    )
    opsets = [helper.make_opsetid("", opset)]
    if any(n.domain == CUSTOM_DOMAIN for n in nodes):
        opsets.append(helper.make_opsetid(CUSTOM_DOMAIN, 1))
    model = helper.make_model(graph, opset_imports=opsets, producer_name="jetfleet-tests")
    model.ir_version = 8
    data: bytes = model.SerializeToString()
    return data


def fp32(name: str, shape: Sequence[int | str | None] | None) -> onnx.ValueInfoProto:
    """An FP32 value; ``shape`` None leaves even the rank unknown."""
    return helper.make_tensor_value_info(
        name, TensorProto.FLOAT, None if shape is None else list(shape)
    )


def weights(name: str, shape: Sequence[int], seed: int = 0) -> onnx.TensorProto:
    rng = np.random.default_rng(seed)
    return numpy_helper.from_array(rng.normal(0, 0.1, shape).astype(np.float32), name)


def ints(name: str, values: Sequence[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def custom(inputs: Sequence[str], outputs: Sequence[str], op: str = "FancyOp") -> onnx.NodeProto:
    """A node of an operator no TensorRT parser knows (as exporters emit for custom layers)."""
    return helper.make_node(op, list(inputs), list(outputs), domain=CUSTOM_DOMAIN)


def chain_with_cpu_op_in_middle() -> bytes:
    """Conv → Relu → [custom op] → Conv → Relu: two engines, two crossings of 1x8x16x16 FP32."""
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        custom(["r1"], ["m"]),
        helper.make_node("Conv", ["m", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["y"]),
    ]
    return make_model(
        nodes,
        [fp32("x", [1, 3, 16, 16])],
        [fp32("y", [1, 8, 16, 16])],
        [weights("w1", [8, 3, 3, 3]), weights("w2", [8, 8, 3, 3], 1)],
        value_info=[fp32("m", [1, 8, 16, 16])],
    )


def diamond() -> bytes:
    """``a`` feeds both a CPU op and ``join``; the CPU op feeds ``join`` too.

    Grouping every supported node naively ({a, join}) would need the CPU op's output inside the
    engine that produces its input: a cycle. The partitioner must split into {a} and {join}.
    """
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="a"),
        custom(["a"], ["b"]),
        helper.make_node("Add", ["a", "b"], ["y"], name="join"),
    ]
    return make_model(
        nodes,
        [fp32("x", [1, 4])],
        [fp32("y", [1, 4])],
        value_info=[fp32("b", [1, 4])],
    )


def _conv_bn_relu6(
    nodes: list[onnx.NodeProto],
    inits: list[onnx.TensorProto],
    x: str,
    cin: int,
    cout: int,
    *,
    kernel: int,
    stride: int = 1,
    group: int = 1,
    relu6: bool = True,
    tag: str,
) -> str:
    pad = kernel // 2
    w = f"{tag}_w"
    inits.append(weights(w, [cout, cin // group, kernel, kernel], seed=len(inits)))
    nodes.append(
        helper.make_node(
            "Conv",
            [x, w],
            [f"{tag}_conv"],
            name=f"{tag}_conv",
            kernel_shape=[kernel, kernel],
            strides=[stride, stride],
            pads=[pad] * 4,
            group=group,
        )
    )
    names = [f"{tag}_{p}" for p in ("scale", "bias", "mean", "var")]
    inits += [
        numpy_helper.from_array(np.ones(cout, np.float32), names[0]),
        numpy_helper.from_array(np.zeros(cout, np.float32), names[1]),
        numpy_helper.from_array(np.zeros(cout, np.float32), names[2]),
        numpy_helper.from_array(np.ones(cout, np.float32), names[3]),
    ]
    nodes.append(helper.make_node("BatchNormalization", [f"{tag}_conv", *names], [f"{tag}_bn"]))
    if not relu6:
        return f"{tag}_bn"
    nodes.append(helper.make_node("Clip", [f"{tag}_bn", "zero", "six"], [f"{tag}_relu6"]))
    return f"{tag}_relu6"


MOBILENET_V2_BLOCKS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1)]
"""(expansion t, channels c, repeats n, first stride s): MobileNetV2's first five stages."""


def mobilenet_v2_like(
    size: int = 224, classes: int = 1000, custom_after_block: int | None = None
) -> bytes:
    """MobileNetV2-style classifier: conv stem, inverted residuals (1x1 expand, 3x3 depthwise,
    1x1 project, residual Add), ReLU6 as Clip, 1x1 head conv, global average pool, Gemm.

    ``custom_after_block`` inserts a custom-domain op after that inverted-residual block (with its
    output shape declared, as exporters do), pushing the rest of the network to a second engine.
    """
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = [
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
        numpy_helper.from_array(np.array(6.0, np.float32), "six"),
    ]
    value_info: list[onnx.ValueInfoProto] = []
    x = _conv_bn_relu6(nodes, inits, "image", 3, 32, kernel=3, stride=2, tag="stem")
    cin, spatial, block = 32, size // 2, 0
    for t, c, n, s in MOBILENET_V2_BLOCKS:
        for i in range(n):
            stride = s if i == 0 else 1
            tag = f"b{block}"
            hidden = cin * t
            h = x
            if t != 1:
                h = _conv_bn_relu6(nodes, inits, h, cin, hidden, kernel=1, tag=f"{tag}_expand")
            h = _conv_bn_relu6(
                nodes,
                inits,
                h,
                hidden,
                hidden,
                kernel=3,
                stride=stride,
                group=hidden,
                tag=f"{tag}_dw",
            )
            h = _conv_bn_relu6(nodes, inits, h, hidden, c, kernel=1, relu6=False, tag=f"{tag}_proj")
            spatial = spatial // stride
            if stride == 1 and cin == c:
                nodes.append(helper.make_node("Add", [x, h], [f"{tag}_add"], name=f"{tag}_add"))
                h = f"{tag}_add"
            if custom_after_block == block:
                nodes.append(custom([h], [f"{tag}_custom"]))
                value_info.append(fp32(f"{tag}_custom", [1, c, spatial, spatial]))
                h = f"{tag}_custom"
            x, cin, block = h, c, block + 1
    x = _conv_bn_relu6(nodes, inits, x, cin, 1280, kernel=1, tag="head")
    nodes += [
        helper.make_node("GlobalAveragePool", [x], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1),
    ]
    inits += [weights("fc_w", [classes, 1280]), weights("fc_b", [classes])]
    return make_model(
        nodes,
        [fp32("image", [1, 3, size, size])],
        [fp32("logits", [1, classes])],
        inits,
        value_info,
    )


def identity_chain(nodes: int) -> bytes:
    """``nodes`` Identity nodes in a chain, 1x4 FP32 in and out: the shape of a security probe's
    (30,000 of them, ~800 KB, once held a push for 533 s of one core)."""
    chain = [helper.make_node("Identity", [f"t{i}"], [f"t{i + 1}"]) for i in range(nodes)]
    return make_model(chain, [fp32("t0", [1, 4])], [fp32(f"t{nodes}", [1, 4])])


def endless_loop() -> bytes:
    """A Loop whose trip count is the largest int64, adding 1 to a 1x4 FP32 tensor each turn:
    a few nodes that keep ONNX Runtime busy for as long as it is let (running an
    uploaded model for reference outputs must be bounded)."""
    one = numpy_helper.from_array(np.ones((1, 4), np.float32), "one")
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Add", ["v_in", "one"], ["v_out"]),
        ],
        "turn",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            fp32("v_in", [1, 4]),
        ],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), fp32("v_out", [1, 4])],
        [one],
    )
    loop = helper.make_node("Loop", ["trips", "keep_going", "x"], ["y"], body=body)
    trips = numpy_helper.from_array(np.array(np.iinfo(np.int64).max, np.int64), "trips")
    keep_going = numpy_helper.from_array(np.array(True), "keep_going")
    return make_model([loop], [fp32("x", [1, 4])], [fp32("y", [1, 4])], [trips, keep_going])


def ir3_cnn_with_constant_of_shape_weights(stages: int = 4) -> bytes:
    """A Caffe2-converted model-zoo CNN in miniature (the ResNet-50/SqueezeNet/VGG class): IR 3,
    opset 9, every initializer also listed in ``graph.input``, and every Conv weight and bias
    computed at run time by ConstantOfShape from a ``..._SHAPE`` int64 initializer. Names carry
    ``/`` as those exports do. Conv stages with Relu, then global pooling and a Gemm classifier.
    """
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []

    def constant_of_shape(name: str, shape: Sequence[int], value: float) -> str:
        inits.append(ints(f"{name}__SHAPE", shape))
        fill = numpy_helper.from_array(np.array([value], np.float32), "")
        nodes.append(helper.make_node("ConstantOfShape", [f"{name}__SHAPE"], [name], value=fill))
        return name

    x, channels = "gpu_0/data_0", 3
    for stage in range(stages):
        out = 16 * (stage + 1)
        w = constant_of_shape(f"gpu_0/conv{stage}_w_0", [out, channels, 3, 3], 0.01)
        b = constant_of_shape(f"gpu_0/conv{stage}_b_0", [out], 0.0)
        conv = f"gpu_0/conv{stage}_0"
        nodes.append(
            helper.make_node(
                "Conv", [x, w, b], [conv], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]
            )
        )
        nodes.append(helper.make_node("Relu", [conv], [f"gpu_0/relu{stage}_0"]))
        x, channels = f"gpu_0/relu{stage}_0", out
    fc_w = constant_of_shape("gpu_0/pred_w_0", [10, channels], 0.01)
    fc_b = constant_of_shape("gpu_0/pred_b_0", [10], 0.0)
    nodes += [
        helper.make_node("GlobalAveragePool", [x], ["gpu_0/pool_0"]),
        helper.make_node("Flatten", ["gpu_0/pool_0"], ["gpu_0/flat_0"], axis=1),
        helper.make_node("Gemm", ["gpu_0/flat_0", fc_w, fc_b], ["gpu_0/pred_0"], transB=1),
        helper.make_node("Softmax", ["gpu_0/pred_0"], ["gpu_0/softmax_1"]),
    ]
    inputs = [fp32("gpu_0/data_0", [1, 3, 224, 224])]
    inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in inits]
    graph = helper.make_graph(nodes, "zoo", inputs, [fp32("gpu_0/softmax_1", [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 3
    data: bytes = model.SerializeToString()
    return data


def dynamic_dims_cnn(input_shape: Sequence[int | str | None], name: str = "images") -> bytes:
    """Two 3x3 Convs (3→8→16, stride 1, pad 1) on an input with dynamic dims as exporters write
    them: ``-1`` as a dim value, ``"?"``/``"batch"`` as dim params. FLOPs at HxW:
    2·(8·H·W)·27 + 2·(16·H·W)·72."""
    nodes = [
        helper.make_node("Conv", [name, "w1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c2"], ["y"]),
    ]
    return make_model(
        nodes,
        [fp32(name, list(input_shape))],
        [fp32("y", [-1, 16, -1, -1])],
        [weights("w1", [8, 3, 3, 3]), weights("w2", [16, 8, 3, 3], 1)],
    )
