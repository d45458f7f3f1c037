"""The arm target's code runs: a model exported for aarch64 (deploy_lib.so, cross-linked) runs under
qemu-aarch64 with TVM's runtime built for aarch64 (make arm-runtime) and matches the x86 build and, for
BEVDet tiny, the float emulator."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tvm")

from tidlx.backends.tvm import build, export  # noqa: E402
from tidlx.backends.tvm.qemu import missing_tools, run_under_qemu  # noqa: E402
from tidlx.ir import Function, IRModule, TensorType, Tuple, Var, call, const  # noqa: E402

_missing = missing_tools()
pytestmark = pytest.mark.skipif(bool(_missing), reason="the arm check needs " + "; ".join(_missing) +
                                " (make system-packages installs the apt packages as root, make arm-runtime "
                                "builds TVM's aarch64 runtime)")


def _model():
    rng = np.random.default_rng(4)
    x = Var("x", TensorType((1, 3, 10, 12), "float32"))
    y = call("nn.conv2d", x, const((rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)), padding=(1, 1))
    y = call("nn.relu", call("nn.bias_add", y, const(rng.standard_normal(8).astype(np.float32))))
    pooled = call("nn.max_pool2d", y, pool_size=(2, 2), strides=(2, 2))
    z = call("nn.softmax", call("image.resize2d", pooled, size=(10, 12), method="linear"), axis=1)
    return IRModule({"main": Function([x], Tuple([call("sigmoid", z), call("mean", pooled, axis=(2, 3))]))})


def test_aarch64_code_under_qemu_matches_x86(tmp_path):
    mod = _model()
    frame = np.random.default_rng(5).standard_normal((1, 3, 10, 12)).astype(np.float32)
    library = export(mod, tmp_path, "arm")["lib"]
    arm = run_under_qemu(library, mod, {"x": frame})
    x86 = build(mod, "x86").run({"x": frame})
    assert len(arm) == len(x86) == 2
    for a, b in zip(arm, x86):
        assert a.shape == b.shape and a.dtype == b.dtype
        assert float(np.max(np.abs(a - b))) <= 1e-5 * max(float(np.max(np.abs(b))), 1e-30)


def test_bevdet_tiny_for_aarch64_under_qemu_matches_the_float_emulator(tmp_path):
    import tidlx
    from tidlx.frontends.onnx import from_onnx
    from tidlx.models import bevdet_img_stage_tiny

    mod = from_onnx(bevdet_img_stage_tiny("resnet18", batch=1))
    frame = {"img": np.random.default_rng(0).standard_normal((1, 3, 64, 192)).astype(np.float32)}
    arm = run_under_qemu(export(mod, tmp_path, "arm")["lib"], mod, frame)
    for a, r in zip(arm, tidlx.emulate(mod, frame)):
        assert a.shape == r.shape
        assert float(np.max(np.abs(a - r))) <= 1e-5 * float(np.max(np.abs(r)))
