"""A small CNN built twice, as ONNX and as the tidlx IR TVM's importer makes of it, run by the
emulator and by onnxruntime: the acceptance bar (max abs error <= 1e-4 x max abs output)."""

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from tidlx.emulator import RunStats, run
from tidlx.ir import Function, IRModule, TensorType, Tuple, TupleGetItem, Var, call, const


class Twin:
    """Adds each layer to an ONNX graph and to a tidlx expression at once."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0

    def weight(self, shape, scale=0.3):
        arr = self.rng.normal(0, scale, shape).astype(np.float32)
        name = f"w{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(arr, name))
        return name, const(arr)

    def node(self, op_type, inputs, **attrs):
        self.n += 1
        out = f"t{self.n}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=f"{op_type}_{self.n}", **attrs))
        return out


def build(twin: Twin):
    x_ir = Var("image", TensorType((1, 4, 16, 16), "float32"))
    x_on = "image"

    def conv(x, c_in, c_out, k, stride=1, pad=1, groups=1, dilation=1):
        xo, xi = x
        wn, wc = twin.weight((c_out, c_in // groups, k, k))
        bn, bc = twin.weight((c_out,), 0.1)
        y_on = twin.node("Conv", [xo, wn, bn], kernel_shape=[k, k], strides=[stride] * 2, pads=[pad] * 4,
                         group=groups, dilations=[dilation] * 2)
        y_ir = call("nn.conv2d", xi, wc, strides=(stride, stride), padding=(pad, pad), groups=groups,
                    dilation=(dilation, dilation), layer=y_on)
        return y_on, call("nn.bias_add", y_ir, bc, axis=1)

    def relu(x):
        return twin.node("Relu", [x[0]]), call("nn.relu", x[1])

    x = (x_on, x_ir)
    x = relu(conv(x, 4, 8, 3, stride=2))                         # 8x8
    dw = relu(conv(x, 8, 8, 3, groups=8))                        # depthwise
    dil = relu(conv(x, 8, 8, 3, pad=2, dilation=2))
    cat = (twin.node("Concat", [dw[0], dil[0]], axis=1), call("concatenate", Tuple([dw[1], dil[1]]), axis=1))
    pooled = (twin.node("AveragePool", [cat[0]], kernel_shape=[2, 2], strides=[2, 2]),
              call("nn.avg_pool2d", cat[1], pool_size=(2, 2), strides=(2, 2)))          # 4x4
    up = (twin.node("Resize", [pooled[0], "", "", "sizes"], mode="linear",
                    coordinate_transformation_mode="half_pixel"),
          call("image.resize2d", pooled[1], size=(8, 8), method="linear"))
    skip = conv(x, 8, 16, 1, pad=0)
    mixed = (twin.node("Add", [up[0], skip[0]]), call("add", up[1], skip[1]))
    parts_on = [f"split{i}" for i in range(2)]
    twin.nodes.append(helper.make_node("Split", [mixed[0], "split_sizes"], parts_on, axis=1))
    parts_ir = call("split", mixed[1], indices_or_sections=2, axis=1)
    gate = (twin.node("Sigmoid", [parts_on[1]]), call("sigmoid", TupleGetItem(parts_ir, 1)))
    gated = (twin.node("Mul", [parts_on[0], gate[0]]), call("multiply", TupleGetItem(parts_ir, 0), gate[1]))
    gp = (twin.node("GlobalAveragePool", [gated[0]]), call("nn.global_avg_pool2d", gated[1]))
    flat = (twin.node("Flatten", [gp[0]]), call("nn.batch_flatten", gp[1]))
    wn, wc = twin.weight((5, 8))
    logits = (twin.node("Gemm", [flat[0], wn], transB=1), call("nn.dense", flat[1], wc))
    probs = (twin.node("Softmax", [logits[0]], axis=1), call("nn.softmax", logits[1], axis=1))

    twin.inits.append(numpy_helper.from_array(np.array([1, 16, 8, 8], np.int64), "sizes"))
    twin.inits.append(numpy_helper.from_array(np.array([8, 8], np.int64), "split_sizes"))
    graph = helper.make_graph(
        twin.nodes, "small_cnn", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 4, 16, 16])],
        [helper.make_tensor_value_info(probs[0], TensorProto.FLOAT, None),
         helper.make_tensor_value_info(gated[0], TensorProto.FLOAT, None)], twin.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    mod = IRModule({"main": Function([x_ir], Tuple([probs[1], gated[1]]))})
    return model, mod


def test_small_cnn_matches_onnxruntime():
    model, mod = build(Twin(0))
    image = np.random.default_rng(1).uniform(-1, 1, (1, 4, 16, 16)).astype(np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = sess.run(None, {"image": image})
    stats = RunStats()
    got = run(mod, {"image": image}, stats=stats)
    assert len(got) == 2
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == np.float32
        assert np.abs(g - e).max() <= 1e-4 * np.abs(e).max()
    assert stats.kernel_calls["nn.conv2d"] == 4
    # the second run reuses the plan and gives the same result bit for bit
    again = run(mod, {"image": image})
    for a, g in zip(again, got):
        np.testing.assert_array_equal(a, g)
