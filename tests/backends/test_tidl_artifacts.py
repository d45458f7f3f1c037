"""TIDL subgraph artifacts (docs/artifacts.md): write -> read gives the same QuantizedSubgraph (tiny and
full built-in BEVDet, 8 and 16 bit, and the quantizer's coverage model); the layout is what the document
says (magic, little-endian, 64-byte aligned sections, CRC-32); a newer version is refused naming the
versions read; every truncation and 1,000 bit flips are clean ArtifactErrors."""

from __future__ import annotations

import dataclasses
import struct
import warnings

import numpy as np
import pytest

import tidlx
from tidlx.backends.tidl.artifacts import NetworkInfo, encode_io, encode_network, subgraph_json
from tidlx.emulator.fixed import artifact_format as fmt
from tidlx.emulator.fixed.artifact_format import ArtifactError
from tidlx.emulator.fixed.artifact_reader import read_io, read_network
from tidlx.emulator.fixed.network import QuantizedLayer, QuantizedSubgraph
from tidlx.frontends.onnx import from_onnx
from tidlx.models import bevdet_img_stage

from test_tidl_quantize import coverage_model


def assert_same(a, b, path="sub"):
    """Equal values of the same Python types, arrays of the same dtype and shape, recursively."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b), path
    elif dataclasses.is_dataclass(a):
        assert type(a) is type(b), path
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b), (path, a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif hasattr(a, "items"):
        assert list(a.keys()) == list(b.keys()), path
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]")
    else:
        assert type(a) is type(b) and a == b, (path, a, b)


def _quantize(mod, **options):
    # TI's default calibration (accuracy_level 1, bias calibration included) on few frames and iterations:
    # the round trip needs every field filled, not good ranges (TI's 20 frames x 50 iterations take minutes)
    options = {"advanced_options:calibration_frames": 2, "advanced_options:calibration_iterations": 1, **options}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # seeded random calibration frames
        return tidlx.quantize(mod, options)


@pytest.fixture(scope="module")
def tiny_models():
    mod = from_onnx(bevdet_img_stage(backbone="resnet18", batch=1, tiny=True))
    return {bits: _quantize(mod, tensor_bits=bits) for bits in (8, 16)}


@pytest.fixture(scope="module")
def small_net(tiny_models):
    sub = tiny_models[8].subgraphs["tidl_1"]
    info = NetworkInfo(7, 0, 1)
    net = encode_network(sub, info)
    return sub, net, encode_io(sub, net, info)


def _round_trip(sub: QuantizedSubgraph, info=NetworkInfo(7, 0, 1)):
    net = encode_network(sub, info)
    art = read_network(net, "net.bin")
    assert_same(sub, art.subgraph, f"@{sub.name}")
    assert (art.calibration_options, art.inference_mode, art.num_cores) == (7, 0, 1)
    io = read_io(encode_io(sub, net, info), "io.bin", art)
    assert [b.data_id for b in io.inputs] == list(sub.inputs) and [b.data_id for b in io.outputs] == list(sub.outputs)
    assert encode_network(art.subgraph, info) == net        # and the read subgraph writes the same bytes
    return net


@pytest.mark.parametrize("bits", [8, 16])
def test_round_trip_tiny_bevdet(tiny_models, bits):
    for sub in tiny_models[bits].subgraphs.values():
        _round_trip(sub)


def test_round_trip_coverage_model():
    mod, _ = coverage_model()
    q = _quantize(mod, tensor_bits=16)
    for sub in q.subgraphs.values():
        _round_trip(sub)


def test_round_trip_full_bevdet():
    mod = from_onnx(bevdet_img_stage(backbone="resnet18", batch=1, tiny=False))
    q = _quantize(mod, tensor_bits=8)
    sizes = {name: len(_round_trip(sub)) for name, sub in q.subgraphs.items()}
    print(f"full BEVDet (resnet18) network records: {sizes} bytes")
    weights = sum(int(layer.weights.size) for s in q.subgraphs.values() for layer in s.layers
                  if layer.weights is not None)
    assert sum(sizes.values()) > weights      # int8 weights: a byte each, plus the rest


def test_layout_is_the_documented_one(small_net):
    sub, net, io = small_net
    assert net[:8] == b"TIDLXNET" and struct.unpack_from("<HHI", net, 8) == (1, 0, 64)
    assert struct.unpack_from("<Q", net, 16)[0] == len(net) and len(net) % 64 == 0
    assert struct.unpack_from("<I", net, 24)[0] == fmt.crc32(net, 24)
    style, bits, mode, cores, calib, n_layers, n_tensors, n_sections = struct.unpack_from("<BBBBIIII", net, 28)
    assert (style, bits, mode, cores, calib) == (sub.quantization_style, 8, 0, 1, 7)
    assert (n_layers, n_tensors, n_sections) == (len(sub.layers), len(sub.tensors), 5)
    previous = 64 + 5 * 24
    for i, tag in enumerate((b"STRS", b"TENS", b"LAYR", b"IOID", b"DATA")):
        got, flags, offset, size = struct.unpack_from("<4sIQQ", net, 64 + 24 * i)
        assert got == tag and flags == 0 and offset % 64 == 0 and offset >= previous
        previous = offset + size
    tens_offset = struct.unpack_from("<Q", net, 64 + 24 + 8)[0]
    record_size, tid = struct.unpack_from("<II", net, tens_offset)
    etype, rank = struct.unpack_from("<BB", net, tens_offset + 16)
    dims = struct.unpack_from("<6I", net, tens_offset + 20)
    scale = struct.unpack_from("<d", net, tens_offset + 44)[0]
    t0 = sub.tensors[0]
    assert (tid, etype, rank, scale) == (0, t0.element_type, len(t0.shape), t0.scale) and record_size % 8 == 0
    assert dims == fmt.padded_dims(t0.shape) and dims[0] == t0.shape[0]   # N first
    assert io[:8] == b"TIDLXIO\0" and struct.unpack_from("<I", io, 28)[0] == struct.unpack_from("<I", net, 24)[0]


def test_padded_dims_are_ti_order():
    assert fmt.padded_dims((6, 64, 16, 44)) == (6, 1, 1, 64, 16, 44)
    assert fmt.padded_dims((2, 10)) == (2, 1, 1, 1, 1, 10)
    for shape in [(), (5,), (2, 3), (1, 2, 3, 4, 5, 6), (6, 64, 16, 44)]:
        assert fmt.unpadded_dims(fmt.padded_dims(shape), len(shape)) == shape
    assert fmt.unpadded_dims((2, 3, 1, 4, 5, 6), 4) is None


def _with_version(data: bytes, major: int, minor: int, crc_offset: int) -> bytes:
    out = bytearray(data)
    struct.pack_into("<HH", out, 8, major, minor)
    struct.pack_into("<I", out, crc_offset, fmt.crc32(bytes(out), crc_offset))
    return bytes(out)


def test_newer_versions_are_refused_naming_the_versions_read(small_net):
    _, net, io = small_net
    with pytest.raises(ArtifactError, match=r"net.bin: written in format 2.0, newer than what this tidlx reads "
                                            r"\(format 1.x, fields of up to 1.0\)"):
        read_network(_with_version(net, 2, 0, 24), "net.bin")
    with pytest.raises(ArtifactError, match=r"written in format 0.3, not what this tidlx reads"):
        read_network(_with_version(net, 0, 3, 24), "net.bin")
    # a newer minor whose fields this reader knows is read (an unknown field: see the next test)
    assert read_network(_with_version(net, 1, 7, 24), "net.bin").version == (1, 7)
    with pytest.raises(ArtifactError, match=r"io.bin: written in format 3.0"):
        read_io(_with_version(io, 3, 0, 16), "io.bin")


def test_a_mismatched_io_descriptor_is_refused(tiny_models, small_net):
    _, net, _ = small_net
    other = tiny_models[16].subgraphs["tidl_1"]
    other_net = encode_network(other, NetworkInfo(7, 0, 1))
    io_of_other = encode_io(other, other_net, NetworkInfo(7, 0, 1))
    with pytest.raises(ArtifactError, match="io.bin: does not belong to this network record"):
        read_io(io_of_other, "io.bin", read_network(net, "net.bin"))


def test_an_unknown_field_is_refused_by_name(small_net):
    """A layer field this reader's QuantizedLayer lacks (a newer writer's) is not silently dropped; at its
    default it is not written, so the file stays readable."""
    sub, _, _ = small_net

    @dataclasses.dataclass(frozen=True, eq=False)
    class NewerLayer(QuantizedLayer):
        lut_offset: int = 0

    layer = sub.layers[1]
    fields = {f.name: getattr(layer, f.name) for f in dataclasses.fields(QuantizedLayer)}

    def with_layer(new):
        return dataclasses.replace(sub, layers=sub.layers[:1] + (new,) + sub.layers[2:])

    assert_same(read_network(encode_network(with_layer(NewerLayer(**fields))), "net.bin").subgraph.layers[1], layer)
    with pytest.raises(ArtifactError, match="has the field 'lut_offset', which this tidlx does not know"):
        read_network(encode_network(with_layer(NewerLayer(**fields, lut_offset=3))), "net.bin")


def test_unwritable_values_are_clear_errors(small_net):
    sub, _, _ = small_net
    layer = dataclasses.replace(sub.layers[1], attrs={"what": object()})
    with pytest.raises(ArtifactError, match="parameter 'what' is a object"):
        encode_network(dataclasses.replace(sub, layers=sub.layers[:1] + (layer,) + sub.layers[2:]))


def test_the_json_has_one_record_a_line(small_net):
    sub, _, _ = small_net
    text = subgraph_json(sub, NetworkInfo(7, 0, 1), 1)
    import json

    doc = json.loads(text)
    assert [t["name"] for t in doc["tensors"]] == [t.name for t in sub.tensors]
    assert len(text.splitlines()) < 40 + len(sub.layers) + len(sub.tensors)


# -- robustness: every truncation, random bit flips ----------------------------------------------

def _refused(data: bytes, io: bytes) -> bool:
    """True when reading the pair raises an ArtifactError (anything else fails the test)."""
    try:
        read_io(io, "io.bin", read_network(data, "net.bin"))
    except ArtifactError:
        return True
    return False


def test_every_truncation_and_1000_bit_flips_are_refused(small_net):
    sub, net, io = small_net
    truncations = sum(_refused(net[:n], io) for n in range(len(net)))
    io_truncations = sum(_refused(net, io[:n]) for n in range(len(io)))
    rng = np.random.default_rng(11)
    flips = 0
    for _ in range(1000):
        target = rng.integers(2)
        blob = bytearray(net if target == 0 else io)
        bit = int(rng.integers(len(blob) * 8))
        blob[bit // 8] ^= 1 << (bit % 8)
        flips += _refused(bytes(blob), io) if target == 0 else _refused(net, bytes(blob))
    print(f"net.bin {len(net)} bytes: {truncations}/{len(net)} truncations refused; io_1.bin {len(io)} bytes: "
          f"{io_truncations}/{len(io)}; {flips}/1000 bit flips refused")
    assert truncations == len(net) and io_truncations == len(io) and flips == 1000


def test_flips_behind_a_recomputed_crc_are_clean_errors_or_valid(small_net):
    """The parser itself, with the CRC fixed up after each flip (a forged file): an ArtifactError or a
    subgraph that passes the structural checks, never another exception."""
    sub, net, _ = small_net
    rng = np.random.default_rng(5)
    refused = 0
    for _ in range(1500):
        blob = bytearray(net)
        bit = int(rng.integers(len(blob) * 8))
        blob[bit // 8] ^= 1 << (bit % 8)
        struct.pack_into("<I", blob, 24, fmt.crc32(bytes(blob), 24))
        try:
            read_network(bytes(blob), "net.bin")
        except ArtifactError:
            refused += 1
    print(f"forged flips (CRC recomputed): {refused}/1500 refused by the structural checks")
    assert refused > 0


KERNEL_TYPES_MODEL = """
def @main(%x: Tensor[(1, 4, 8, 8), float32]) {
  %0 = nn.conv2d_transpose(%x, meta[relay.Constant][0], channels=4, kernel_size=[2, 2], strides=[2, 2]);
  %1 = sigmoid(%0);
  %2 = nn.conv2d(%1, meta[relay.Constant][1], padding=[1, 1, 1, 1], groups=4, channels=4, kernel_size=[3, 3]);
  %3 = tanh(%2);
  %4 = nn.leaky_relu(%3, alpha=0.1);
  %5 = nn.pad(%4, 0f, pad_width=[[0, 0], [0, 0], [1, 1], [1, 1]]);
  %6 = nn.depth_to_space(%5, block_size=2);
  %7 = strided_slice(%6, begin=[0, 0, 0, 0], end=[1, 1, 32, 32], strides=[1, 1, 2, 2]);
  %8 = transpose(%7, axes=[0, 1, 3, 2]);
  %9 = reshape(%8, newshape=[1, 2, 8, 16]);
  %10 = split(%9, indices_or_sections=2, axis=1);
  %11 = add(%10.0, %10.1);
  nn.softmax(%11, axis=3)
}
"""


@pytest.mark.parametrize("options", [{"tensor_bits": 8}, {"tensor_bits": 16, "accuracy_level": 9,
                                                            "advanced_options:channel_wise_quantization": 1}])
def test_every_kernel_type_reads_back_and_runs_the_same(options):
    """The reader's checks of what the kernels rely on (artifact_checks.py) accept every layer type the
    quantizer writes (deconv, depthwise per-channel conv, table and PReLU activations, pad,
    depth-to-space, slices, transpose, reshape, softmax), and the read subgraph runs to the same bits."""
    from tidlx.emulator.fixed.layers import run_subgraph

    rng = np.random.default_rng(0)
    consts = [rng.standard_normal((4, 4, 2, 2)).astype(np.float32),
              rng.standard_normal((4, 1, 3, 3)).astype(np.float32)]
    q = _quantize(tidlx.parse_relay(KERNEL_TYPES_MODEL, consts), **options)
    seen = set()
    for sub in q.subgraphs.values():
        _round_trip(sub)
        read = read_network(encode_network(sub, NetworkInfo(7, 0, 1)), "net.bin").subgraph
        x = [rng.standard_normal(sub.tensors[t].shape).astype(np.float32) for t in sub.inputs]
        for a, b in zip(run_subgraph(sub, x), run_subgraph(read, x)):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        seen |= {layer.type for layer in sub.layers} | {"per-channel" for layer in sub.layers if layer.per_channel}
    expected = {"Deconv", "Sigmoid", "Conv", "Tanh", "PReLU", "Pad", "DepthToSpace", "Slice", "Transpose", "Reshape",
                "EltWise", "SoftMax"}
    assert expected <= seen, expected - seen
    if options.get("accuracy_level") == 9:
        assert "per-channel" in seen


def test_round_trip_keeps_the_releases_softmax_rule():
    """A softmax quantized for tidl_version 08.06 carries its pad rule (narrow_row_pads) through the
    artifacts, so a compiled folder runs the release it was compiled for."""
    from test_tidl_quantize import SOFTMAX_ROWS, _params

    mod = tidlx.parse_relay(SOFTMAX_ROWS, params=_params(5, ((4, 4, 3, 3), 0.3)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        q = tidlx.quantize(mod, {"accuracy_level": 0, "tidl_version": "08.06"},
                           calib={"x": np.random.default_rng(6).standard_normal((4, 4, 6, 10)).astype(np.float32)})
    sub = q.subgraphs["tidl_0"]
    art = read_network(_round_trip(sub), "net.bin")
    soft = [layer for layer in art.subgraph.layers if layer.type == "SoftMax"]
    assert [layer.attrs.get("narrow_row_pads") for layer in soft] == [1]


def test_softmax_sums_over_the_target_devices_float_lanes():
    """TIDL sums a softmax's denominator per float lane of the C7x vector: 16 on AM68A's 512-bit C7x,
    8 on AM67A's 256-bit one. Rows of 10 reach 8 lanes, so on AM67A each row gets 6 pad lanes of the
    type's lowest value (TIDL 11.x pads a row once it is as wide as the lanes) and every output is at
    most AM68A's; the lane count travels with the compiled layer."""
    from test_tidl_quantize import SOFTMAX_ROWS, _params

    mod = tidlx.parse_relay(SOFTMAX_ROWS, params=_params(5, ((4, 4, 3, 3), 0.3)))
    rng = np.random.default_rng(6)
    calib = {"x": rng.standard_normal((4, 4, 6, 10)).astype(np.float32)}
    x = {"x": rng.standard_normal((1, 4, 6, 10)).astype(np.float32)}
    runs, lanes = {}, {}
    for device in ("AM68A", "AM67A"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            q = tidlx.quantize(mod, {"accuracy_level": 0, "target_device": device,
                                     "advanced_options:quantization_scale_type": 0}, calib=calib)
        art = read_network(_round_trip(q.subgraphs["tidl_0"]), "net.bin")
        (soft,) = [layer for layer in art.subgraph.layers if layer.type == "SoftMax"]
        lanes[device] = soft.attrs.get("lanes")
        runs[device] = q.run(x)[0]
    assert lanes == {"AM68A": None, "AM67A": 8}
    assert (runs["AM67A"] <= runs["AM68A"]).all() and (runs["AM67A"] < runs["AM68A"]).any()
    assert (runs["AM67A"].sum(axis=-1) < 1).all()
