"""The ORT flow (``flow=ort``, backends/tidl/ort_flow.py): TI's grouping of ONNX nodes in node order,
its merge of subgraphs, max_num_subgraphs keeping the first subgraphs, the lists by ONNX type and by
node or output name, the ONNX-side rules, cyclic groupings, and TI's allowedNode.txt."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tidlx
from tidlx.backends.tidl.allowed_nodes import (AllowedNodesError, compare_allowed, format_allowed_nodes,
                                               parse_allowed_nodes, read_allowed_nodes)
from tidlx.backends.tidl.flow import resolve_flow, resolve_options
from tidlx.backends.tidl.options import BATCH_ENV_VAR, FLOW_SPEC, OptionError
from tidlx.backends.tidl.ort_flow import ONNX_NODES_ATTR, attach_onnx_nodes, onnx_nodes
from tidlx.frontends.onnx import from_onnx
from tidlx.ir.errors import TidlxWarning
from tidlx.ir.partition.node_order import group_units


# -- small models ---------------------------------------------------------------------------------

def _conv(name, x, y, cin, cout, seed):
    w = np.random.default_rng(seed).standard_normal((cout, cin, 3, 3)).astype(np.float32)
    return helper.make_node("Conv", [x, name + "_w"], [y], name=name, pads=[1, 1, 1, 1]), \
        numpy_helper.from_array(w, name + "_w")


def _model(nodes, inits=(), outputs=("y",), shape=(1, 4, 8, 8)):
    graph = helper.make_graph(list(nodes), "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                              initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def chain():
    """c1 r1 | e1 (host) | c2 r2: two runs."""
    n1, w1 = _conv("c1", "x", "a", 4, 4, 0)
    n4, w4 = _conv("c2", "e", "f", 4, 4, 1)
    return _model([n1, helper.make_node("Relu", ["a"], ["b"], name="r1"), helper.make_node("Exp", ["b"], ["e"], name="e1"),
                   n4, helper.make_node("Relu", ["f"], ["y"], name="r2")], [w1, w4])


def merging(second_reads_input=False):
    """c1 | e1 (host) | r2: r2 reads only c1's output (merged into c1's subgraph), or also the graph
    input x (not merged: a graph input is an input no subgraph writes)."""
    n1, w1 = _conv("c1", "x", "a", 4, 4, 0)
    last = helper.make_node("Add", ["a", "x"], ["y"], name="r2") if second_reads_input else \
        helper.make_node("Relu", ["a"], ["y"], name="r2")
    return _model([n1, helper.make_node("Exp", ["a"], ["e"], name="e1"), last], [w1], outputs=("y", "e"))


def three_runs():
    """c0 | e0 | c1 | e1 | c2 r: the last run has by far the most MACs."""
    n0, w0 = _conv("c0", "x", "a0", 4, 4, 0)
    n1, w1 = _conv("c1", "e0", "a1", 4, 4, 1)
    n2, w2 = _conv("c2", "e1", "a2", 4, 64, 2)
    return _model([n0, helper.make_node("Exp", ["a0"], ["e0"], name="e0"), n1,
                   helper.make_node("Exp", ["a1"], ["e1"], name="e1"), n2,
                   helper.make_node("Relu", ["a2"], ["y"], name="r")], [w0, w1, w2])


def cyclic():
    """Nodes not in topological order: the run [c1, add] feeds e1 (host), which comes back into add."""
    n1, w1 = _conv("c1", "x", "a", 4, 4, 0)
    return _model([n1, helper.make_node("Add", ["a", "e"], ["y"], name="add"),
                   helper.make_node("Exp", ["a"], ["e"], name="e1")], [w1])


def breadth_first():
    """A, B (host), C, D, E in breadth-first order: tidlx's import order is depth-first (A C B D E)."""
    n1, w1 = _conv("A", "x", "a", 4, 4, 0)
    return _model([n1, helper.make_node("Exp", ["x"], ["b"], name="B"), helper.make_node("Relu", ["a"], ["c"], name="C"),
                   helper.make_node("Relu", ["b"], ["d"], name="D"), helper.make_node("Add", ["c", "d"], ["y"], name="E")],
                  [w1])


def load(model):
    return attach_onnx_nodes(from_onnx(model), model)


def ort(model, options=None, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", TidlxWarning)
        module, report = tidlx.partition(load(model), dict(options or {}, flow="ort"), **kw)
    return module, report


# -- grouping in node order --------------------------------------------------------------------------

def test_supported_nodes_are_grouped_in_contiguous_runs_of_node_order():
    module, report = ort(chain())
    assert report.ort.groups == ((0, 1), (3, 4))
    assert report.ort.functions == ("tidl_0", "tidl_1")
    assert [r.layers for r in report.result.regions] == [("c1", "r1"), ("c2", "r2")]
    assert report.ort.summary_line() == "Final number of subgraphs created are : 2, - Offloaded Nodes - 4, Total Nodes - 5"
    assert report.ort.allowed_nodes_text() == "2\n2\n0\n1\n2\n3\n4\n"
    assert [v.state for v in report.ort.verdicts] == ["tidl", "tidl", "host", "tidl", "tidl"]
    assert "tidlx has no TIDL layer model for exp (TI's ONNX Runtime import runs Exp as TIDL_ExpLayer" in \
        report.ort.verdicts[2].reason
    assert report.strategy == "ort" and report.verdict().startswith("exports: yes — 2 TIDL subgraphs")
    assert sorted(name for name, fn in module.items() if fn.attrs.get("Compiler") == "tidl") == ["tidl_0", "tidl_1"]


def test_a_subgraph_reading_only_another_subgraphs_outputs_is_merged_into_it():
    _, report = ort(merging())
    assert report.ort.preliminary == 2 and report.ort.merges == 1
    assert report.ort.groups == ((0, 2),)
    assert report.ort.allowed_nodes_text() == "1\n2\n0\n2\n"
    _, report = ort(merging(second_reads_input=True))   # it also reads the graph input: no merge
    assert report.ort.merges == 0 and report.ort.groups == ((0,), (2,))


def test_the_merge_searches_as_ti_does_and_appends_the_merged_units():
    # units 0..4; 1 and 3 on the host. Group [4] reads only what [2] writes, [2] only what [0] writes:
    # (i=0, j=1) merges first ([0, 2]), then [4] joins it: [0, 2, 4]
    supported = {0: True, 1: False, 2: True, 3: False, 4: True}
    reads = {0: {"x"}, 1: {"t0"}, 2: {"t0"}, 3: {"t2"}, 4: {"t2"}}
    writes = {u: {f"t{u}"} for u in range(5)}
    g = group_units(range(5), supported, reads, writes)
    assert g.runs == ((0,), (2,), (4,)) and g.groups == ((0, 2, 4),) and g.merges == ((0, 2), (0, 4))
    # a group reading its own tensors only (nothing from outside) joins the first other group
    g = group_units([0, 1, 2, 3], {0: True, 1: False, 2: True, 3: True}, {0: {"x"}, 1: {"t0"}, 2: set(), 3: {"t2"}},
                    {u: {f"t{u}"} for u in range(4)})
    assert g.groups == ((0, 2, 3),)
    # a group reading only a later group's tensors (an order that is not topological) joins that group,
    # its units appended after the later group's, in the later group's place
    g = group_units([0, 1, 2], {0: True, 1: False, 2: True}, {0: {"t2"}, 1: {"t0"}, 2: {"x"}},
                    {u: {f"t{u}"} for u in range(3)})
    assert g.groups == ((2, 0),) and g.merges == ((2, 0),)
    # the count limit keeps the first groups of the list
    g = group_units(range(5), {u: u % 2 == 0 for u in range(5)}, {u: {"x"} for u in range(5)},
                    {u: {f"t{u}"} for u in range(5)}, max_num=2)
    assert g.kept == ((0,), (2,)) and g.dropped == ((4,),)


def test_max_num_subgraphs_keeps_the_first_subgraphs_in_node_order():
    _, report = ort(three_runs(), {"max_num_subgraphs": 2})
    assert report.ort.groups == ((0,), (2,)) and report.ort.dropped == 1
    kept = [layer for r in report.result.regions for layer in r.layers]
    assert kept == ["c0", "c1"]
    pruned = {h.layer: h for h in report.host_ops}
    assert pruned["c2"].kind == "limit:max_num_subgraphs" and "first 2 subgraphs in ONNX node order" in pruned["c2"].reason
    # the TVM flow keeps the subgraphs with the most MACs instead
    _, tvm = tidlx.partition(load(three_runs()), {"max_num_subgraphs": 2})
    assert "c2" in [layer for r in tvm.result.regions for layer in r.layers]


def test_deny_list_layer_type_takes_onnx_op_types():
    _, report = ort(three_runs(), {"deny_list:layer_type": "Relu"})
    assert report.ort.groups == ((0,), (2,), (4,))
    assert report.ort.verdicts[5].state == "host" and "deny_list:layer_type" in report.ort.verdicts[5].reason


@pytest.mark.parametrize("name", ["r1", "b"])   # the node, or its first output
def test_deny_list_layer_name_takes_a_node_or_its_output_name(name):
    _, report = ort(chain(), {"deny_list:layer_name": name})
    assert report.ort.groups == ((0,), (3, 4))
    assert "deny_list:layer_name" in report.ort.verdicts[1].reason


@pytest.mark.parametrize("names", ["c1,c2", "a,f"])   # nodes, or their first outputs
def test_allow_list_layer_name_takes_node_or_output_names(names):
    _, report = ort(chain(), {"allow_list:layer_name": names})
    assert report.ort.groups == ((0,), (3,))
    assert "allow_list:layer_name" in report.ort.verdicts[4].reason


def test_allow_list_does_not_combine_with_a_deny_list_in_the_ort_flow():
    with pytest.raises(OptionError, match="allow_list:layer_name or the deny lists, not both"):
        ort(chain(), {"allow_list:layer_name": "c1", "deny_list:layer_type": "Exp"})
    tidlx.partition(load(chain()), {"allow_list:layer_name": "c1", "deny_list:layer_type": "Exp"})   # TVM flow: fine


def test_no_batch_limit_in_the_ort_flow(monkeypatch):
    monkeypatch.delenv(BATCH_ENV_VAR, raising=False)
    n1, w1 = _conv("c1", "x", "a", 4, 4, 0)
    model = _model([n1, helper.make_node("Relu", ["a"], ["y"], name="r1")], [w1], shape=(2, 4, 8, 8))
    _, report = ort(model)
    assert report.ort.groups == ((0, 1),) and report.batch_limit.value is None
    _, tvm = tidlx.partition(load(model))
    assert tvm.num_subgraphs == 0 and {h.kind for h in tvm.host_ops} == {"batch"}
    _, limited = ort(model, {"max_batch_size": 1})   # given by the user: applies
    assert limited.num_subgraphs == 0


def test_squeeze_of_a_non_4d_input_runs_on_tidl_in_the_ort_flow():
    """TI's supported-operator table (11.0): Squeeze takes up to 6 non-singleton dims (TIDL 8.x's
    import refused a Squeeze of a 3-D input)."""
    n1, w1 = _conv("c1", "x", "a", 4, 4, 0)
    shape = numpy_helper.from_array(np.array([1, 1, 256], np.int64), "shape")
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    model = _model([n1, helper.make_node("Reshape", ["a", "shape"], ["b"], name="reshape"),
                    helper.make_node("Squeeze", ["b", "axes"], ["c"], name="squeeze"),
                    helper.make_node("Relu", ["c"], ["y"], name="r")], [w1, shape, axes])
    _, report = ort(model)
    assert report.ort.groups == ((0, 1, 2, 3),) and not report.host_ops
    _, tvm = tidlx.partition(load(model))
    assert tvm.num_subgraphs == 1 and not tvm.host_ops


def test_a_node_merged_by_graph_preparation_is_listed_with_its_neighbour():
    pads = numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")
    n1, w1 = _conv("c1", "p", "a", 4, 4, 0)
    n1.attribute.pop()  # no pads of its own: the Pad node pads
    model = _model([helper.make_node("Pad", ["x", "pads"], ["p"], name="pad"), n1,
                    helper.make_node("Relu", ["a"], ["y"], name="r")], [w1, pads])
    _, report = ort(model)
    assert report.ort.groups == ((0, 1, 2),)
    assert report.ort.verdicts[0].merged_into == 1 and "MergePadIntoConv" in report.ort.verdicts[0].reason


def test_a_batch_norm_merged_into_a_gemm_is_listed_with_it():
    import importlib.util
    import os

    spec = importlib.util.spec_from_file_location("tidl_partition_tests",
                                                  os.path.join(os.path.dirname(__file__), "test_tidl_partition.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.bn_between_gemms()   # fc1 (Gemm), bn, fc2 (Gemm)
    _, report = ort(model, {"model_surgery": 0})
    assert report.ort.groups == ((0, 1, 2),) and report.ort.verdicts[1].merged_into == 0
    # TI's default surgery (convert_batchnorm_input_to_4D) first runs the rank-2 BN in 4-D
    # between reshapes: it no longer sits next to a Gemm and stays a layer of its own
    _, report = ort(model)
    assert report.ort.groups == ((0, 1, 2),) and report.ort.verdicts[1].merged_into is None
    assert [t.rule for t in report.transformations] == ["convert_batchnorm_input_to_4D"]
    _, report = ort(model, {"deny_list:layer_type": "BatchNormalization"})
    assert report.ort.groups == ((0,), (2,)) and report.ort.verdicts[1].state == "host"


def test_nodes_folded_at_import_belong_to_no_subgraph():
    w = numpy_helper.from_array(np.ones((4, 4, 3, 3), np.float32), "w")
    model = _model([helper.make_node("Constant", [], ["wc"], name="const", value=w),
                    helper.make_node("Conv", ["x", "wc"], ["a"], name="c1", pads=[1, 1, 1, 1]),
                    helper.make_node("Relu", ["a"], ["y"], name="r")])
    _, report = ort(model)
    assert report.ort.groups == ((1, 2),) and report.ort.verdicts[0].state == "removed"
    assert report.ort.summary_line().endswith("Offloaded Nodes - 2, Total Nodes - 3")
    # a real compile numbers the graph ONNX Runtime hands TIDL, without the Constant node: a comparison says so
    shifted = compare_allowed(report.ort, parse_allowed_nodes("1\n2\n0\n1\n", "ti.txt"))
    assert shifted.constant_nodes == 1 and "Constant node(s); ONNX Runtime turns them into initializers" in \
        shifted.lines()[-1]


# -- the cyclic case ---------------------------------------------------------------------------------

def test_a_cyclic_grouping_is_named_and_the_acyclic_partition_shown_instead():
    with pytest.warns(TidlxWarning, match='the graph is not acyclic') as caught:
        module, report = tidlx.partition(load(cyclic()), {"flow": "ort"})
    message = str(caught[0].message)
    assert "node 0 'c1' (Conv) goes through node 2 'e1' (Exp)" in message and "node 1 'add' (Add)" in message
    assert "acyclic partition of its partitioner (greedy)" in message
    assert report.ort.ti_groups == ((0, 1),) and report.ort.cyclic
    assert report.ort.summary_line(ti=True).startswith("Final number of subgraphs created are : 1,")
    assert report.ort.partitioner == "greedy" and report.strategy == "ort, cyclic: greedy"
    assert report.ort.groups == ((0,), (1,))   # tidlx's acyclic partition: the Add apart from the conv
    assert [r.layers for r in report.result.regions] == [("c1",), ("add",)]
    assert report.ort.allowed_nodes_text() == "2\n1\n0\n1\n1\n"


@pytest.mark.parametrize("make", [chain, merging, three_runs, cyclic, breadth_first])
def test_the_partitioned_module_computes_what_the_model_does(make):
    from tidlx.ir.verify import verify

    mod = load(make())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TidlxWarning)
        module, _ = tidlx.partition(mod, {"flow": "ort", "max_num_subgraphs": 2})
    verify(module)
    x = np.random.default_rng(0).standard_normal((1, 4, 8, 8)).astype(np.float32)
    for want, got in zip(tidlx.emulate(mod, {"x": x}), tidlx.emulate(module, {"x": x})):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_an_acyclic_grouping_warns_nothing():
    for model in (chain(), merging(), three_runs(), breadth_first()):
        ort(model)   # warnings are errors here


# -- the node list ---------------------------------------------------------------------------------------

def test_node_indices_follow_the_files_node_order():
    _, report = ort(breadth_first())
    assert [n.name for n in report.ort.nodes] == ["A", "B", "C", "D", "E"]
    assert report.ort.groups == ((0,), (2, 3, 4))
    with pytest.warns(TidlxWarning, match="does not record its ONNX file's node order"):
        _, unordered = tidlx.partition(from_onnx(breadth_first()), {"flow": "ort"})
    assert [n.name for n in unordered.ort.nodes] == ["A", "C", "B", "D", "E"]   # tidlx's import order
    assert not unordered.ort.exact


def test_a_module_loaded_from_an_onnx_file_numbers_the_files_nodes(tmp_path):
    """tidlx.load records the file, so the ORT flow reads its node order without attach_onnx_nodes."""
    import warnings

    path = tmp_path / "breadth_first.onnx"
    onnx.save(breadth_first(), str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, report = tidlx.partition(tidlx.load(path), {"flow": "ort"})
    assert [n.name for n in report.ort.nodes] == ["A", "B", "C", "D", "E"] and report.ort.exact


def test_node_names_are_the_importers_layer_names():
    from tidlx.frontends.onnx.graph import node_names

    model = chain()
    model.graph.node[1].name = ""   # an unnamed node: <OpType>_<index>
    assert [n.name for n in onnx_nodes(model)] == node_names(model.graph)
    mod = load(model)
    assert set(mod.layer_types) <= {n.name for n in onnx_nodes(model)}
    assert len(mod.attrs[ONNX_NODES_ATTR]) == 5


def test_a_node_list_of_another_model_is_an_error():
    mod = attach_onnx_nodes(from_onnx(chain()), three_runs())
    with pytest.raises(tidlx.ir.TidlxError, match="not its model's"):
        tidlx.partition(mod, {"flow": "ort"})


def test_a_module_not_from_onnx_has_no_ort_flow():
    mod = tidlx.parse_relay('def @main(%x: Tensor[(1, 4), float32]) { nn.relu(%x) }')
    with pytest.raises(tidlx.ir.TidlxError, match="not imported from ONNX"):
        tidlx.partition(mod, {"flow": "ort"})


# -- the option -------------------------------------------------------------------------------------------

def test_the_flow_option():
    assert resolve_flow(None) == resolve_flow({}) == resolve_flow({"tensor_bits": 16}) == "tvm"
    assert resolve_flow({"flow": "ORT"}) == resolve_flow(["flow=ort", "tensor_bits=16"]) == "ort"
    options, passes = resolve_options({"flow": "ort", "tensor_bits": 16})
    assert options.tensor_bits == 16 and passes == ()
    with pytest.raises(OptionError, match="option flow='onnx' is not allowed: it must be one of tvm, ort"):
        resolve_options({"flow": "onnx"})
    with pytest.raises(OptionError, match="did you mean 'flow'"):
        resolve_options({"flwo": "ort"})
    assert FLOW_SPEC.origin == "tidlx" and FLOW_SPEC.choices == ("tvm", "ort") and FLOW_SPEC.support == "partial"
    assert FLOW_SPEC.steps and FLOW_SPEC.support_note


def test_the_tvm_flow_is_unchanged_by_default():
    _, default = tidlx.partition(load(chain()))
    _, tvm = tidlx.partition(load(chain()), {"flow": "tvm"})
    assert default.to_json() == tvm.to_json() and default.ort is None and default.strategy == "greedy"


def test_comparing_strategies_is_refused_in_the_ort_flow():
    from tidlx.backends.tidl.flow import compare_strategies

    with pytest.raises(OptionError, match="TVM flow"):
        compare_strategies(load(chain()), {"flow": "ort"})


# -- TI's files ----------------------------------------------------------------------------------------

def test_onnxrt_metadata_in_tis_format():
    _, report = ort(chain())
    assert report.ort.metadata_text() == (
        "numGraphNodes=5\n"
        "0:subGraphName=subgraph_0\n0:numInputs=1\n0:numOutputs=1\n0:inputIdx=0\n0:inDataNames=x\n0:outDataNames=b\n"
        "1:subGraphName=subgraph_1\n1:numInputs=1\n1:numOutputs=1\n1:inputIdx=0\n1:inDataNames=e\n1:outDataNames=y\n")


def test_allowed_nodes_round_trip(tmp_path):
    groups = ((0, 1, 2), (7,), (4, 9))
    text = format_allowed_nodes(groups)
    assert text == "3\n3\n0\n1\n2\n1\n7\n2\n4\n9\n"
    path = tmp_path / "allowedNode.txt"
    path.write_text(text)
    assert read_allowed_nodes(path).groups == groups
    assert parse_allowed_nodes("0\n").groups == ()
    assert parse_allowed_nodes("1\n1\n5\n\n\n").groups == ((5,),)   # blank lines at the end
    assert read_allowed_nodes(_write(tmp_path, b"1\r\n1\r\n5\r\n")).groups == ((5,),)


def _write(tmp_path, data: bytes, name="allowedNode.txt"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("data, line, what", [
    (b"", 1, "the file is empty"),
    (b"two\n", 1, "'two' is not the number of subgraphs"),
    (b"1\n-3\n", 2, "'-3' is not the node count of subgraph 0"),
    (b"1\n2\n0\n1.5\n", 4, "'1.5' is not a node index of subgraph 0"),
    (b"2\n1\n0\n", 4, "the file ends after 1 of the 2 subgraphs"),
    (b"1\n3\n0\n1\n", 5, "the file ends inside subgraph 0: 3 node(s) announced at line 2, 2 given"),
    (b"1\n1\n0\n1\n", 4, "more lines than the 1 subgraph(s) line 1 announces"),
    (b"2\n1\n4\n1\n4\n", 5, "node 4 is listed twice (first at line 3)"),
    (b"1\n0\n", 2, "subgraph 0 has no nodes"),
    (b"1\n\n0\n", 2, "empty line where the node count of subgraph 0 belongs"),
    (b"1\n1\n\xff\n", 3, "not text"),
])
def test_a_malformed_allowed_nodes_file_names_the_file_and_line(tmp_path, data, line, what):
    path = _write(tmp_path, data)
    with pytest.raises(AllowedNodesError) as info:
        read_allowed_nodes(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: ") and what in message and "\n" not in message


def test_compare_allowed_node_by_node():
    _, report = ort(chain())
    same = compare_allowed(report.ort, parse_allowed_nodes(report.ort.allowed_nodes_text(), "ti.txt"))
    assert same.same and same.lines()[-1] == "  the same subgraphs, node for node"
    diff = compare_allowed(report.ort, parse_allowed_nodes("2\n3\n0\n1\n2\n1\n4\n", "ti.txt"))
    assert [(d.index, d.kind, d.ti, d.tidlx) for d in diff.differences] == \
        [(2, "offload", 0, None), (3, "offload", None, 1), (4, "grouping", 1, 1)]
    assert "tidlx has no TIDL layer model for exp" in diff.differences[0].reason
    assert diff.lines()[0].endswith("2 of 5 node(s) agree")
    with pytest.raises(AllowedNodesError, match="lists node 9, and the model has 5 node"):
        compare_allowed(report.ort, parse_allowed_nodes("1\n1\n9\n", "ti.txt"))


def test_compare_allowed_uses_tis_grouping_when_it_is_cyclic():
    with pytest.warns(TidlxWarning):
        _, report = tidlx.partition(load(cyclic()), {"flow": "ort"})
    assert compare_allowed(report.ort, parse_allowed_nodes("1\n2\n0\n1\n")).same


def test_the_report_json_of_the_ort_flow():
    _, report = ort(chain())
    doc = report.ort.to_dict()
    assert doc["flow"] == "ort" and doc["node_order"] == "file" and doc["total_nodes"] == 5
    assert [s["nodes"] for s in doc["subgraphs"]] == [[0, 1], [3, 4]]
    assert doc["subgraphs"][1]["inputs"] == ["e"] and doc["nodes"][2]["state"] == "host"
