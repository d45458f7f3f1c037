"""Writes the TVM params fixtures with apache-tvm itself (not with tidlx), so tidlx's reader
(frontends/relay/params.py) is tested against files TVM wrote; tests/test_params_files.py
imports the value definitions below (without tvm). Run once, in an environment with
apache-tvm (0.27.0.post1 made the committed files):

    python -m venv /tmp/tvm && /tmp/tvm/bin/pip install apache-tvm numpy ml_dtypes
    /tmp/tvm/bin/python tests/data/tvm_params/make_fixtures.py
"""

import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def arrays():
    """The arrays of dtypes.params; tests/test_params_files.py rebuilds the same values."""
    return {
        "f32": np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5,
        "f16": np.array([1.5, -2.0, 65504.0], dtype=np.float16),
        "f64": np.array([[1e300, -1e-300]], dtype=np.float64),
        "i8": np.array([-128, 0, 127], dtype=np.int8),
        "u8": np.array([0, 1, 255], dtype=np.uint8),
        "i16": np.array([-32768, 32767], dtype=np.int16),
        "u16": np.array([65535], dtype=np.uint16),
        "i32": np.array([[-(2 ** 31)], [2 ** 31 - 1]], dtype=np.int32),
        "u32": np.array([2 ** 32 - 1], dtype=np.uint32),
        "i64": np.array([-(2 ** 63), 2 ** 63 - 1], dtype=np.int64),
        "u64": np.array([2 ** 64 - 1], dtype=np.uint64),
        "bool": np.array([True, False, True]),
        "scalar": np.array(3.25, dtype=np.float32),
        "empty": np.zeros((0, 4), dtype=np.float32),
        "conv1.weight/with:odd name": np.ones((1, 1, 1, 1), dtype=np.float32),
    }


def conv_weights():
    """The weights of conv.txt (TVM's names, as relay.frontend.from_onnx gives them)."""
    rng = np.random.default_rng(13)
    return {"conv.weight": rng.standard_normal((8, 3, 3, 3)).astype(np.float32),
            "conv.bias": rng.standard_normal(8).astype(np.float32)}


def save(name, values):
    import tvm
    from tvm import runtime

    data = bytes(runtime.save_param_dict({k: runtime.tensor(v) for k, v in values.items()}))
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
    print(f"{name}: {len(data)} bytes, tvm {tvm.__version__}")


if __name__ == "__main__":
    save("dtypes.params", arrays())
    save("conv.params", conv_weights())
