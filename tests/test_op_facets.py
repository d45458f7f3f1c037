"""Every op has the facets it must have, and every facet names a real op (ir/op.py).

The must-haves, per facet:

* ``emulator.reference``: every op (the float semantics are defined for all of them);
* ``macs``: every op whose fusion pattern does not already fix its count (opaque and
  out_elemwise_fusable ops: convolutions, products, pools, norms, ...);
* ``tidl.rule`` and ``tidl.layer``: together or not at all (a rule decides when the op becomes
  its TIDL layer), the layer one of TI's layer types;
* ``onnx.op_types``: only op types the ONNX importer converts;
* ``emulator.fast`` and ``emulator.epilogue``: only on ops that have a reference kernel (a fast
  kernel overrides one, never stands alone).
"""

from __future__ import annotations

import json

import pytest

from tidlx.cli import main
from tidlx.ir.op import declared_facets, get_op, list_ops, ops_with_attr
from tidlx.op_table import coverage, load_facets

load_facets()

#: patterns whose MAC count is fixed by the pattern itself (ir/analysis.py _pattern_macs)
_PATTERN_COUNTED = ("elemwise", "broadcast", "injective", "comm_reduce", "tuple")


def _missing(key, ops):
    return [name for name in ops if not get_op(name).has_attr(key)]


def test_facets_are_declared_by_their_packages():
    owners = {key: decl.owner for key, decl in declared_facets().items()}
    for key in ("macs", "emulator.reference", "emulator.fast", "emulator.epilogue", "tidl.rule", "tidl.layer",
                "onnx.op_types"):
        assert key in owners, f"facet {key} is not declared"
    assert owners["macs"].startswith("tidlx.ir")
    assert owners["emulator.reference"].startswith("tidlx.emulator")
    assert owners["tidl.rule"].startswith("tidlx.backends.tidl")
    assert owners["onnx.op_types"].startswith("tidlx.frontends.onnx")


def test_every_op_has_a_reference_kernel():
    assert _missing("emulator.reference", list_ops()) == []


def test_every_compute_op_has_a_mac_count():
    heavy = [name for name in list_ops() if get_op(name).pattern not in _PATTERN_COUNTED]
    assert heavy, "no op needs a MAC facet?"
    assert _missing("macs", heavy) == []


def test_tidl_rule_and_layer_come_together():
    rules, layers = set(ops_with_attr("tidl.rule")), set(ops_with_attr("tidl.layer"))
    assert rules, "no TIDL rules registered"
    assert rules == layers, f"rule without layer: {sorted(rules - layers)}; layer without rule: {sorted(layers - rules)}"


def test_tidl_layers_are_ti_layer_types():
    from tidlx.backends.tidl.layers import LAYER_TYPE_IDS

    unknown = {name: layer for name, layer in ops_with_attr("tidl.layer").items() if layer not in LAYER_TYPE_IDS}
    assert unknown == {}


def test_onnx_op_types_are_converted_by_the_importer():
    from tidlx.frontends.onnx.converters import CONVERTERS

    facet = ops_with_attr("onnx.op_types")
    assert facet, "no op records the ONNX op types that import to it"
    assert facet["nn.conv2d"] and "Conv" in facet["nn.conv2d"]
    strays = {name: [t for t in types if t not in CONVERTERS] for name, types in facet.items()}
    assert {k: v for k, v in strays.items() if v} == {}
    for types in facet.values():
        assert list(types) == sorted(set(types)), "op types must be sorted and unique (deterministic output)"


def test_every_converter_feeds_some_op():
    from tidlx.frontends.onnx.converters import CONVERTERS

    fed = {t for types in ops_with_attr("onnx.op_types").values() for t in types}
    # constant outputs fold at import; Identity and (inference) Dropout pass their input through
    no_op = {"Shape", "Size", "ConstantOfShape", "Constant", "Identity", "Dropout"}
    assert sorted(set(CONVERTERS) - fed - no_op) == []


@pytest.mark.parametrize("key", ["emulator.fast", "emulator.epilogue"])
def test_overrides_have_a_reference(key):
    assert [name for name in ops_with_attr(key) if not get_op(name).has_attr("emulator.reference")] == []


def test_coverage_lists_every_op_and_facet():
    data = coverage()
    assert [rec["name"] for rec in data["ops"]] == list_ops()
    conv = next(rec for rec in data["ops"] if rec["name"] == "nn.conv2d")
    assert {"macs", "emulator.reference", "tidl.rule", "tidl.layer", "onnx.op_types"} <= set(conv["facets"])
    assert conv["facets"]["tidl.layer"] == "Conv"
    assert "emulator/reference/" in json.dumps(conv["facets"]["emulator.reference"])
    assert data["facets"]["emulator.reference"]["ops"] == len(list_ops())


def test_tidlx_ops_cli(capsys):
    assert main(["ops", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["ops"]) == len(list_ops())
    assert main(["ops"]) == 0
    out = capsys.readouterr().out
    assert "nn.conv2d" in out and "tidl.layer" in out
    assert main(["ops", "nn.conv2d"]) == 0
    out = capsys.readouterr().out
    assert "tidl.rule" in out and "ir/analysis.py" in out
    assert main(["ops", "nn.conv2x"]) == 2
    assert "nn.conv2d" in capsys.readouterr().err
