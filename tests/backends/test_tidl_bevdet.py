"""Acceptance checks on the built-in BEVDet image stage.

What the partition of BEVDet-R50 (batch 1, 256x704) is, as measured:

* 2 TIDL subgraphs (greedy): ``tidl_0`` is the ResNet-50 backbone, the FPN neck and the depth
  net's 1x1 conv up to the depth/context slices (185 nodes, 95 TIDL layers, >99.9% of the
  MACs); ``tidl_1`` is BEVDet's outer product after the softmax (unsqueeze, mul, reshape,
  transpose: 4 nodes).
* One op on the host: the depth softmax over axis 1 (the channel axis), kind ``rule`` (TIDL:
  softmax along width or height only).
* At batch 6 (the 6 cameras) every op whose result has batch 6 is refused, kind ``batch``, with
  a reason naming TIDL_RELAY_MAX_BATCH_SIZE; no MACs go to TIDL. Only the final reshape to
  (1, 6, ...) and transpose (output batch 1) pass the batch rule, as a 0-MAC subgraph.
  With TIDL_RELAY_MAX_BATCH_SIZE=6 or max_batch_size=6 the model is accepted: the backbone is
  offloaded again; the two Slices (TIDL: Slice needs batch 1) join the softmax on the host.

The full ResNet-50 model is partitioned once (module fixture); everything else runs on the tiny
variant (channels / 8, 64x192), which has the same graph.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import tidlx
from tidlx.backends.tidl.flow import compare_strategies
from tidlx.backends.tidl.options import BATCH_ENV_VAR
from tidlx.frontends.onnx import from_onnx
from tidlx.ir import structural_equal
from tidlx.ir.partition import register_strategy
from tidlx.ir.partition.regions import StrategyOutcome
from tidlx.models import bevdet_img_stage

SVG_NS = "{http://www.w3.org/2000/svg}"
SOFTMAX = "/img_view_transformer/Softmax"
SLICES = ["/img_view_transformer/Slice", "/img_view_transformer/Slice_1"]
#: The built-in strategies (other tests register their own in the same registry).
STRATEGIES = ("greedy", "max-offload", "min-transfer")
OUTER_PRODUCT = ["/img_view_transformer/Unsqueeze", "/img_view_transformer/Mul", "/img_view_transformer/Reshape",
                 "/img_view_transformer/Transpose"]


@pytest.fixture(scope="module")
def full_b1():
    mod = from_onnx(bevdet_img_stage("resnet50", batch=1))
    partitioned, report = tidlx.partition(mod)
    return mod, partitioned, report


def tiny(batch=1):
    return from_onnx(bevdet_img_stage("resnet50", batch=batch, tiny=True))


@pytest.fixture(scope="module")
def tiny_b6():
    return tiny(6)


def conv_layers(mod):
    return [layer for layer, kind in mod.layer_types.items() if kind == "Conv"]


# -- batch 1 ---------------------------------------------------------------------------------------

def test_full_resnet50_batch1_partition(full_b1):
    mod, partitioned, report = full_b1
    assert report.batch == 1
    assert [s.name for s in report.subgraphs] == ["tidl_0", "tidl_1"]
    backbone, outer = report.subgraphs
    assert set(conv_layers(mod)) <= set(backbone.layers)  # every conv (57) on TIDL
    assert backbone.ops["nn.conv2d"] == 57 and backbone.ops["nn.batch_norm"] == 53
    assert outer.layers[-len(OUTER_PRODUCT):] == tuple(OUTER_PRODUCT)
    assert [(h.layer, h.op, h.kind) for h in report.host_ops] == [(SOFTMAX, "nn.softmax", "rule")]
    assert "softmax along axis 1 (channel)" in report.host_ops[0].reason
    assert report.tidl_macs_percent > 99.9
    # boundaries: the image in; depth logits and context out; softmax + context into the outer product
    assert [t.source for t in backbone.inputs] == ["%img"]
    assert [t.shape for t in backbone.inputs] == [(1, 3, 256, 704)]
    assert [t.shape for t in backbone.outputs] == [(1, 59, 16, 44), (1, 64, 1, 16, 44)]
    assert [t.source for t in outer.inputs] == [f"nn.softmax '{SOFTMAX}'", backbone.outputs[1].source]
    assert outer.outputs[0].shape == (1, 1, 59, 16, 44, 64)
    assert outer.outputs[0].nbytes == 59 * 16 * 44 * 64 * 4
    assert partitioned.astext(show_meta_data=False).count('Compiler="tidl"') == 2


def test_full_resnet50_svg_is_readable(full_b1):
    _, _, report = full_b1
    svg = report.svg()
    root = ET.fromstring(svg)
    boxes = []
    for g in root.iter(SVG_NS + "g"):
        if g.get("class") == "node":
            r = g.find(SVG_NS + "rect")
            box = tuple(float(r.get(k)) for k in ("x", "y", "width", "height"))
            boxes.append((g.get("data-group"), r.get("fill"), *box))
    groups = {}
    for group, fill, *_ in boxes:
        groups.setdefault(group, set()).add(fill)
    assert set(groups) == {"tidl_0", "tidl_1", "host", "io"}
    assert all(len(f) == 1 for f in groups.values())
    assert len({next(iter(groups[g])) for g in ("tidl_0", "tidl_1", "host")}) == 3
    # composites drawn as one box: far fewer boxes than the 190 calls
    assert len([b for b in boxes if b[0] != "io"]) < 110
    # no edge crosses a box: every path segment stays clear of every box it does not start or end at
    rects = [b[2:] for b in boxes]
    for path in root.iter(SVG_NS + "path"):
        points = _path_points(path.get("d"))
        for (x1, y1), (x2, y2) in zip(points, points[1:]):
            for (rx, ry, rw, rh) in rects:
                assert not _segment_hits_box(x1, y1, x2, y2, rx + 1, ry + 1, rx + rw - 1, ry + rh - 1), \
                    (path.get("d"), (rx, ry))
    width, height = float(root.get("width")), float(root.get("height"))
    assert width <= 1200 and height < 8000


def _path_points(d):
    pts = []
    for token in d.replace("M", " ").replace("C", " ").replace("L", " ").split():
        x, y = token.split(",")
        pts.append((float(x), float(y)))
    return pts


def _segment_hits_box(x1, y1, x2, y2, left, top, right, bottom) -> bool:
    """Liang-Barsky: does the segment enter the open box?"""
    t0, t1 = 0.0, 1.0
    dx, dy = x2 - x1, y2 - y1
    for p, q in ((-dx, x1 - left), (dx, right - x1), (-dy, y1 - top), (dy, bottom - y1)):
        if p == 0:
            if q <= 0:
                return False
        else:
            t = q / p
            if p < 0:
                t0 = max(t0, t)
            else:
                t1 = min(t1, t)
    return t0 < t1


# -- batch 6 ---------------------------------------------------------------------------------------

def test_batch6_is_refused_naming_the_environment_variable(tiny_b6, monkeypatch):
    monkeypatch.delenv(BATCH_ENV_VAR, raising=False)
    _, report = tidlx.partition(tiny_b6)
    assert report.batch == 6 and report.tidl_macs == 0
    kinds = report.host_kinds()
    assert kinds["batch"] >= 180
    batch_ops = [h for h in report.host_ops if h.kind == "batch"]
    assert all(f"{BATCH_ENV_VAR}=1" in h.reason and "max_batch_size=6" in h.reason for h in batch_ops)
    assert set(conv_layers(tiny_b6)) <= {h.layer for h in batch_ops}
    # the reshape of 6 x ... to (1, 6, ...) still handles 6 frames (its input batch); only the transpose
    # after it works on a batch-1 tensor and passes the batch rule, but a subgraph of that transpose alone
    # has no MACs, and TI's flow (min_mac_threshold = 1) returns it to the host
    assert report.num_subgraphs == 0
    transpose = [h for h in report.host_ops if h.layer == "/img_view_transformer/Transpose"]
    assert [(h.kind, h.supported) for h in transpose] == [("limit:min_subgraph_macs", True)]
    assert "its subgraph has 0 MACs < min_subgraph_macs 1" in transpose[0].reason
    assert report.to_dict()["batch"] == {"model": 6, "limit": 1, "limit_from": f"{BATCH_ENV_VAR}=1"}
    # min_subgraph_macs=0 keeps the 0-MAC subgraph (as tidlx did before it followed TI here)
    _, kept = tidlx.partition(tiny_b6, {"min_subgraph_macs": 0})
    assert [s.layers for s in kept.subgraphs] == [("/img_view_transformer/Transpose",)]


@pytest.mark.parametrize("how", ["environment", "option"])
def test_batch6_is_accepted_with_the_limit_raised(tiny_b6, monkeypatch, how):
    monkeypatch.delenv(BATCH_ENV_VAR, raising=False)
    options = None
    if how == "environment":
        monkeypatch.setenv(BATCH_ENV_VAR, "6")
    else:
        options = {"max_batch_size": 6}
    _, report = tidlx.partition(tiny_b6, options)
    assert "batch" not in report.host_kinds()
    assert report.num_subgraphs == 2 and report.tidl_macs_percent > 99.9
    assert set(conv_layers(tiny_b6)) <= set(report.subgraphs[0].layers)
    assert {h.layer: h.kind for h in report.host_ops} == {SLICES[0]: "rule", SOFTMAX: "rule", SLICES[1]: "rule"}
    assert all("batch" in h.reason for h in report.host_ops if h.op == "strided_slice")
    assert report.batch_limit.describe() == ("max_batch_size=6" if how == "option" else f"{BATCH_ENV_VAR}=6")


# -- the user's lists ------------------------------------------------------------------------------

def test_deny_layer_names_move_exactly_those_layers():
    mod = tiny()
    standalone = ["/img_backbone/maxpool/MaxPool", "/img_backbone/layer2/layer2.1/Add", "/img_neck/Resize"]
    in_composite = ["/img_backbone/layer3/layer3.0/conv2/Conv"]  # conv of a conv + BN + ReLU layer
    denied = standalone + in_composite
    _, report = tidlx.partition(mod, {"deny_list:layer_name": ",".join(denied)})
    assert sorted(report.host_layers()) == sorted(denied + [SOFTMAX])
    assert {h.layer: h.kind for h in report.host_ops if h.layer in denied} == dict.fromkeys(
        denied, "deny_list:layer_name")
    # its BN and ReLU stay on TIDL as a BatchNorm layer
    assert "/img_backbone/layer3/layer3.0/bn2/BatchNormalization" in report.tidl_layers()
    baseline = set(tidlx.partition(mod)[1].tidl_layers())
    assert set(report.tidl_layers()) == baseline - set(denied)


def test_allow_list_keeps_only_those_layers_on_tidl():
    mod = tiny()
    allowed = ["/img_backbone/conv1/Conv", "/img_backbone/bn1/BatchNormalization", "/img_backbone/relu/Relu",
               "/img_backbone/maxpool/MaxPool", "/img_neck/Resize", SOFTMAX]
    _, report = tidlx.partition(mod, {"allow_list:layer_name": allowed})
    on_tidl = set(report.tidl_layers())
    # the softmax is allowed but breaks a rule; the resize, alone in its subgraph, has no MACs and goes
    # back to the host (TI's min_mac_threshold = 1)
    assert on_tidl == set(allowed) - {SOFTMAX, "/img_neck/Resize"}
    kinds = {h.layer: h.kind for h in report.host_ops}
    assert kinds[SOFTMAX] == "rule" and kinds["/img_neck/Resize"] == "limit:min_subgraph_macs"
    assert all(k == "allow_list" for layer, k in kinds.items() if layer not in (SOFTMAX, "/img_neck/Resize"))


# -- printing, parsing, emulating -----------------------------------------------------------------

def test_partitioned_module_round_trips_and_emulates_bit_identically():
    mod = tiny()
    partitioned, report = tidlx.partition(mod)
    text = partitioned.astext()
    parsed = tidlx.parse_relay(text)
    assert structural_equal(parsed, partitioned)
    image = np.random.default_rng(0).standard_normal((1, 3, 64, 192), dtype=np.float32)
    want = tidlx.emulate(report.prepared_module, {"img": image})
    got = tidlx.emulate(partitioned, {"img": image})
    again = tidlx.emulate(parsed, {"img": image})
    assert len(want) == len(got) == 2
    for w, g, a in zip(want, got, again):
        assert w.dtype == g.dtype and np.array_equal(w, g) and np.array_equal(w, a)


# -- strategies ------------------------------------------------------------------------------------

def test_each_strategy_on_tiny_bevdet():
    mod = tiny()
    for strategy in STRATEGIES:
        partitioned, report = tidlx.partition(mod, strategy=strategy)
        assert report.strategy == strategy
        assert SOFTMAX in report.host_layers()
        assert report.tidl_macs_percent > 99.0
        assert len([n for n in partitioned if n.startswith("tidl_")]) == report.num_subgraphs
        # every call is in exactly one place
        tidl_calls = sum(s.num_nodes for s in report.subgraphs)
        assert tidl_calls + len(report.host_ops) == 190


def test_strategy_comparison_table():
    mod = tiny()
    comparison = compare_strategies(mod, {"max_subgraph_io": 2}, STRATEGIES, model_name="bevdet tiny")
    rows = {r.strategy: r for r in comparison}
    assert list(rows) == list(STRATEGIES) and all(r.error is None for r in comparison)
    # greedy returns a subgraph over the I/O limit to the host whole (TI's rule); max-offload cuts it
    assert rows["greedy"].subgraphs == 0 and rows["greedy"].host_ops_by_kind["limit:max_subgraph_io"] > 0
    assert rows["max-offload"].tidl_macs_percent > 99.0 and rows["max-offload"].subgraphs > 1
    text = comparison.render_text()
    for name in STRATEGIES:
        assert name in text
    data = json.loads(comparison.to_json())
    assert data["model"] == "bevdet tiny" and len(data["strategies"]) == 3


def test_a_failing_strategy_gets_a_row_with_its_error():
    name = "test-bevdet-offloads-everything"

    @register_strategy(name)
    def everything(graph, limits, cost):
        return StrategyOutcome([list(range(len(graph.calls)))], {})

    comparison = compare_strategies(tiny(), strategies=["greedy", name])
    assert [r.strategy for r in comparison] == ["greedy", name]
    assert comparison.rows[0].error is None
    assert "offloaded nn.softmax '/img_view_transformer/Softmax', which is not supported" in comparison.rows[1].error
    assert "failed: strategy" in comparison.render_text(width=400)
