"""Targeted cases of the partitioner: cycles, limits, groups, tuples, outlining, options, errors."""

from __future__ import annotations

import numpy as np
import pytest

from tidlx import emulator
from tidlx.ir import (Function, GlobalVar, IRModule, Let, TensorType, Tuple, TupleGetItem, Var, call, const,
                      verify)
from tidlx.ir.expr import Call
from tidlx.ir.partition import (CostModel, PartitionError, PartitionLimits, StrategyOutcome, list_strategies,
                                partition, register_strategy)
from tidlx.ir.traversal import post_order

NO_LIMITS = PartitionLimits(None, None, None)


def module(params, body) -> IRModule:
    return IRModule({"main": Function(params, body)})


def reject(*layers):
    """An oracle rejecting the calls with these layer names."""
    return lambda c: f"{c.layer} is rejected" if c.layer in layers else None


def same_outputs(a: IRModule, b: IRModule, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    feeds = {p.name_hint: rng.standard_normal(p.type_annotation.shape).astype(p.type_annotation.dtype)
             for p in a["main"].params}
    for x, y in zip(emulator.run(a, feeds), emulator.run(b, feeds)):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6)


def conv(x, cin, cout, layer, k=3):
    w = const(np.random.default_rng(len(layer)).standard_normal((cout, cin, k, k)).astype("float32") * 0.1)
    return call("nn.conv2d", x, w, padding=(k // 2,) * 4, channels=cout, kernel_size=(k, k), layer=layer)


def main_calls(result):
    return [n for n in post_order(result.module["main"].body) if isinstance(n, Call)]


# --- cycles -------------------------------------------------------------------------------------

def diamond():
    x = Var("x", TensorType((1, 4)))
    a = call("nn.relu", x, layer="A")
    b = call("sigmoid", a, layer="B")
    c = call("add", a, b, layer="C")
    return module([x], c), (a, b, c)


@pytest.mark.parametrize("strategy", ["greedy", "max-offload"])
def test_diamond_through_the_host_is_never_merged(strategy):
    mod, (a, b, c) = diamond()
    result = partition(mod, reject("B"), strategy=strategy)
    assert [[k.layer for k in r.calls] for r in result.regions] == [["A"], ["C"]]
    assert result.host_reason(b) == "B is rejected"
    # @main runs tidl_0, then the host sigmoid, then tidl_1.
    order = [c.op.name_hint if isinstance(c.op, GlobalVar) else c.op_name for c in main_calls(result)]
    assert order == ["tidl_0", "sigmoid", "tidl_1"]
    same_outputs(mod, result.module)


def test_cycle_through_another_region_is_refused():
    # A -> B(host) -> C and A -> D -> C: A, D, C merge; a second path through a *region*
    # (E is supported but its producer F is not) must not be contracted either.
    x = Var("x", TensorType((1, 4)))
    a = call("nn.relu", x, layer="A")
    b = call("sigmoid", a, layer="B")
    d = call("tanh", a, layer="D")
    c = call("add", b, d, layer="C")
    mod = module([x], c)
    result = partition(mod, reject("B"), limits=NO_LIMITS)
    assert [[k.layer for k in r.calls] for r in result.regions] == [["A", "D"], ["C"]]
    same_outputs(mod, result.module)


# --- limits -------------------------------------------------------------------------------------

def three_convs_in_a_chain():
    x = Var("x", TensorType((1, 4, 8, 8)))
    a = conv(x, 4, 32, "convA")            # the most MACs
    s1 = call("sigmoid", a, layer="cut1")
    b = conv(s1, 32, 16, "convB")
    s2 = call("sigmoid", b, layer="cut2")
    c = conv(s2, 16, 2, "convC")           # the fewest
    return module([x], c), (a, b, c)


@pytest.mark.parametrize("strategy", ["greedy", "max-offload"])
def test_max_num_subgraphs_keeps_the_most_macs(strategy):
    mod, (a, b, c) = three_convs_in_a_chain()
    result = partition(mod, reject("cut1", "cut2"), strategy=strategy,
                       limits=PartitionLimits(max_num_subgraphs=2))
    kept = [r.calls[0].layer for r in result.regions]
    assert kept == ["convA", "convB"]
    assert result.host_reason(c).startswith("pruned by max_num_subgraphs=2")
    assert [h.supported for h in result.host_calls if h.call is c] == [True]
    same_outputs(mod, result.module)


def parallel_convs():
    x = Var("x", TensorType((1, 4, 8, 8)))
    outs = []
    for name, cout in (("A", 16), ("B", 8), ("C", 4)):
        outs.append(call("sigmoid", conv(x, 4, cout, "conv" + name), layer="host" + name))
    return module([x], Tuple(outs))


def test_max_offload_merges_independent_regions_to_fit_the_count():
    mod = parallel_convs()
    oracle = reject("hostA", "hostB", "hostC")
    greedy = partition(mod, oracle, limits=PartitionLimits(max_num_subgraphs=1))
    assert [r.calls[0].layer for r in greedy.regions] == ["convA"]
    best = partition(mod, oracle, strategy="max-offload", limits=PartitionLimits(max_num_subgraphs=1))
    assert len(best.regions) == 1 and len(best.regions[0].calls) == 3
    assert best.offloaded_macs == greedy.total_macs - sum(h.macs for h in greedy.host_calls if not h.supported)
    assert best.regions[0].num_io == 4     # one input, three outputs
    same_outputs(mod, best.module)


def add_chain(n_inputs: int):
    xs = [Var(f"x{i}", TensorType((1, 4))) for i in range(n_inputs)]
    acc = xs[0]
    for i, x in enumerate(xs[1:]):
        acc = call("add", acc, x, layer=f"add{i}")
    return module(xs, acc)


def test_io_limit_returns_the_subgraph_to_the_host_in_greedy():
    mod = add_chain(40)
    result = partition(mod, lambda c: None)
    assert result.regions == ()
    reasons = {h.reason for h in result.host_calls}
    assert reasons == {"its subgraph has 41 inputs/outputs > 32 (max_subgraph_io)"}


def test_io_limit_splits_the_subgraph_in_max_offload():
    mod = add_chain(40)
    result = partition(mod, lambda c: None, strategy="max-offload")
    assert len(result.regions) == 2
    assert all(r.num_io <= 32 for r in result.regions)
    assert sum(r.num_nodes for r in result.regions) == 39 and not result.host_calls
    same_outputs(mod, result.module)


def test_node_limit_cuts_regions():
    x = Var("x", TensorType((1, 4)))
    y = x
    for i in range(10):
        y = call("nn.relu", y, layer=f"r{i}")
    mod = module([x], y)
    for strategy in ("greedy", "max-offload", "min-transfer"):
        result = partition(mod, lambda c: None, strategy=strategy,
                           limits=PartitionLimits(max_num_subgraph_nodes=4),
                           cost_model=CostModel(launch_s=1e-12, host_macs_per_s=1.0))
        assert [r.num_nodes for r in result.regions] == [4, 4, 2], strategy
        same_outputs(mod, result.module)


def test_min_subgraph_macs_returns_data_movement_subgraphs():
    x = Var("x", TensorType((1, 4, 8, 8)))
    s = call("sigmoid", x, layer="host1")
    r = call("reshape", s, newshape=(1, 256), layer="reshape")
    t = call("tanh", r, layer="host2")
    mod = module([x], t)
    kept = partition(mod, reject("host1", "host2"))
    assert [c.layer for c in kept.regions[0].calls] == ["reshape"]
    dropped = partition(mod, reject("host1", "host2"), limits=PartitionLimits(min_subgraph_macs=1))
    assert dropped.regions == ()
    assert "0 MACs < min_subgraph_macs 1" in dropped.host_reason(r)


# --- min-transfer -------------------------------------------------------------------------------

def test_min_transfer_drops_subgraphs_that_do_not_pay_for_their_launch():
    x = Var("x", TensorType((1, 4, 8, 8)))
    s = call("sigmoid", x, layer="host1")
    r = call("reshape", s, newshape=(1, 256), layer="reshape")
    t = call("tanh", r, layer="host2")
    mod = module([x], t)
    result = partition(mod, reject("host1", "host2"), strategy="min-transfer")
    assert result.regions == ()
    assert result.host_reason(r).startswith("min-transfer: its subgraph would not pay off")


def test_min_transfer_moves_a_growing_boundary_op_to_the_host():
    x = Var("x", TensorType((1, 16, 32, 32)))
    y = conv(x, 16, 16, "conv")
    up = call("nn.upsampling", y, scale_h=4.0, scale_w=4.0, layer="upsample")   # 16x the bytes, 0 MACs
    out = call("sigmoid", up, layer="host")
    mod = module([x], out)
    greedy = partition(mod, reject("host"))
    assert [c.layer for c in greedy.regions[0].calls] == ["conv", "upsample"]
    lean = partition(mod, reject("host"), strategy="min-transfer")
    assert [c.layer for c in lean.regions[0].calls] == ["conv"]
    assert lean.host_reason(up).startswith("min-transfer: running it on the host saves")
    assert lean.transfer_bytes < greedy.transfer_bytes
    assert lean.estimated_seconds() < greedy.estimated_seconds()
    same_outputs(mod, lean.module)


# --- composite groups ---------------------------------------------------------------------------

def conv_bias_relu(x, cin, cout, name):
    c = conv(x, cin, cout, name)
    b = call("nn.bias_add", c, const(np.zeros((cout,), "float32")), layer=name)
    r = call("nn.relu", b, layer=name + ".relu")
    return r, [c, b, r]


def test_composite_group_goes_to_the_host_whole():
    x = Var("x", TensorType((1, 4, 8, 8)))
    y1, g1 = conv_bias_relu(x, 4, 8, "block1")
    y2, g2 = conv_bias_relu(y1, 8, 8, "block2")
    mod = module([x], y2)
    result = partition(mod, reject("block1.relu"), groups=[g1, g2])
    assert [c.layer for c in result.regions[0].calls] == ["block2", "block2", "block2.relu"]
    assert result.host_reason(g1[0]) == ("its composite group stays on the host with nn.relu 'block1.relu': "
                                         "block1.relu is rejected")
    assert result.host_reason(g1[2]) == "block1.relu is rejected"
    same_outputs(mod, result.module)


def test_composite_groups_are_never_cut_by_the_node_limit():
    x = Var("x", TensorType((1, 4, 8, 8)))
    y, groups = x, []
    for i in range(3):
        y, g = conv_bias_relu(y, 4 if i == 0 else 8, 8, f"block{i}")
        groups.append(g)
    mod = module([x], y)
    for strategy in ("greedy", "max-offload"):
        result = partition(mod, lambda c: None, groups=groups, strategy=strategy,
                           limits=PartitionLimits(max_num_subgraph_nodes=4))
        assert [len(r.calls) for r in result.regions] == [3, 3, 3]
        assert [r.layers[0] for r in result.regions] == ["block0", "block1", "block2"]


def test_group_larger_than_the_node_limit_stays_on_the_host():
    x = Var("x", TensorType((1, 4, 8, 8)))
    y, g = conv_bias_relu(x, 4, 8, "block")
    result = partition(module([x], y), lambda c: None, groups=[g], limits=PartitionLimits(max_num_subgraph_nodes=2))
    assert result.regions == ()
    assert result.host_reason(g[0]) == "its subgraph has 3 nodes > max_num_subgraph_nodes 2"


def test_non_convex_group_is_an_error():
    mod, (a, b, c) = diamond()
    with pytest.raises(PartitionError, match="not convex"):
        partition(mod, lambda k: None, groups=[[a, c]])


# --- tuples and multiple outputs ------------------------------------------------------------------

def test_multi_output_region_returns_a_tuple_projected_at_the_call_site():
    x = Var("x", TensorType((1, 4)))
    r = call("nn.relu", x, layer="relu")
    t = call("tanh", r, layer="tanh")
    s = call("sigmoid", r, layer="host")
    out = call("add", s, t, layer="host_add")
    mod = module([x], out)
    result = partition(mod, reject("host", "host_add"))
    (region,) = result.regions
    assert [b.source for b in region.outputs] == ["nn.relu 'relu'", "tanh 'tanh'"]
    assert [b.name for b in region.outputs] == ["tidl_0.0", "tidl_0.1"]
    fn = result.module["tidl_0"]
    assert isinstance(fn.body, Tuple) and len(fn.body.fields) == 2
    projections = [n for n in post_order(result.module["main"].body) if isinstance(n, TupleGetItem)]
    assert sorted(p.index for p in projections) == [0, 1]
    assert all(isinstance(p.tuple_value, Call) and p.tuple_value.op.name_hint == "tidl_0" for p in projections)
    same_outputs(mod, result.module)


def test_batch_norm_projection_stays_with_the_batch_norm():
    x = Var("x", TensorType((1, 4, 2, 2)))
    vec = const(np.ones((4,), "float32"))
    bn = call("nn.batch_norm", x, vec, vec, vec, vec, layer="bn")
    out = call("sigmoid", TupleGetItem(bn, 0), layer="host")
    mod = module([x], out)
    result = partition(mod, reject("host"))
    (region,) = result.regions
    assert [(b.source, b.path, b.type.shape) for b in region.outputs] == [("nn.batch_norm 'bn'.0", (0,), (1, 4, 2, 2))]
    body = result.module["tidl_0"].body
    assert isinstance(body, TupleGetItem) and body.index == 0 and body.tuple_value.op_name == "nn.batch_norm"
    host_args = main_calls(result)[-1].args
    assert isinstance(host_args[0], Call)    # the host reads the subgraph's single tensor directly
    same_outputs(mod, result.module)


def test_tuple_feeding_concatenate_stays_with_it():
    x = Var("x", TensorType((1, 4)))
    a = call("sigmoid", x, layer="hostA")
    b = call("tanh", x, layer="hostB")
    cat = call("concatenate", Tuple([a, b]), axis=0, layer="cat")
    mod = module([x], cat)
    result = partition(mod, reject("hostA", "hostB"))
    fn = result.module["tidl_0"]
    assert [p.name_hint for p in fn.params] == ["tidl_0_i0", "tidl_0_i1"]
    assert fn.body.op_name == "concatenate" and isinstance(fn.body.args[0], Tuple)
    assert list(fn.body.args[0].fields) == list(fn.params)
    same_outputs(mod, result.module)


def test_tuple_valued_inputs_and_outputs_are_flattened():
    x = Var("x", TensorType((2, 4)))
    parts = call("split", x, indices_or_sections=2, axis=0, layer="split")    # host
    cat = call("concatenate", parts, axis=0, layer="cat")                      # reads the tuple whole
    split2 = call("split", cat, indices_or_sections=2, axis=0, layer="split2")
    mod = module([x], Tuple([cat, split2]))                                    # returns a tuple value
    result = partition(mod, reject("split"))
    (region,) = result.regions
    assert [b.source for b in region.inputs] == ["split 'split'.0", "split 'split'.1"]
    assert [b.source for b in region.outputs] == ["concatenate 'cat'", "split 'split2'.0", "split 'split2'.1"]
    verify(result.module)
    same_outputs(mod, result.module)


# --- outlining, names, API ------------------------------------------------------------------------

def test_names_attributes_and_layers_follow_the_options():
    mod, (a, b, c) = diamond()
    result = partition(mod, reject("B"), name_prefix="tvmgen_default_tidl_main_")
    assert [r.name for r in result.regions] == ["tvmgen_default_tidl_main_0", "tvmgen_default_tidl_main_1"]
    fn = result.module["tvmgen_default_tidl_main_1"]
    assert dict(fn.attrs) == {"Compiler": "tidl", "Primitive": 1, "Inline": 1,
                              "global_symbol": "tvmgen_default_tidl_main_1"}
    assert [p.name_hint for p in fn.params] == ["tidl_1_i0", "tidl_1_i1"]
    assert fn.body.layer == "C"
    assert list(result.module) == ["main", "tvmgen_default_tidl_main_0", "tvmgen_default_tidl_main_1"]
    other = partition(mod, reject("B"), compiler="mycc")
    assert [r.name for r in other.regions] == ["mycc_0", "mycc_1"]
    assert other.module["mycc_0"].attrs["Compiler"] == "mycc"


def test_numbering_follows_topological_position():
    mod, (a, b, c) = diamond()
    result = partition(mod, reject("B"))
    assert result.region_of(a).name == "tidl_0" and result.region_of(c).name == "tidl_1"
    assert result.region_of(b) is None
    assert partition(mod, reject("B")).module["tidl_1"].body.layer == "C"   # deterministic


def test_result_accounting():
    mod, (a, b, c) = diamond()
    result = partition(mod, reject("B"))
    assert result.total_macs == 12 and result.offloaded_macs == 8 and result.host_macs == 4
    assert result.transfer_bytes == 16 + 16 + 32 + 16
    first = result.regions[0]
    assert (first.inputs[0].source, first.inputs[0].producer, first.inputs[0].nbytes) == ("%x", None, 16)
    text = result.summary()
    assert "2 subgraph(s) (greedy)" in text and "host: sigmoid 'B': B is rejected" in text


def test_function_input_and_untouched_original():
    mod, _ = diamond()
    before = mod["main"]
    result = partition(mod["main"], reject("B"))
    assert "tidl_0" in result.module and mod["main"] is before and "tidl_0" not in mod


def test_everything_on_the_host_keeps_main_intact():
    mod, _ = diamond()
    result = partition(mod, lambda c: "nothing is supported")
    assert result.regions == () and len(result.module) == 1
    assert result.module["main"].body is mod["main"].body


def test_calls_of_global_functions_stay_on_the_host():
    y = Var("y", TensorType((1, 4)))
    helper = Function([y], call("nn.relu", y))
    x = Var("x", TensorType((1, 4)))
    mod = IRModule({"helper": helper})
    mod["main"] = Function([x], call("tanh", Call(mod.get_global_var("helper"), [call("sigmoid", x)])))
    result = partition(mod, lambda c: None)
    host = {h.call.op.name_hint if isinstance(h.call.op, GlobalVar) else h.call.op_name: h.reason
            for h in result.host_calls}
    assert host == {"helper": "calls the global function @helper, not an op"}
    assert len(result.regions) == 2
    same_outputs(mod, result.module)


def test_long_chain_partitions_without_recursion():
    x = Var("x", TensorType((1, 2)))
    y = x
    for i in range(6000):
        y = call("sigmoid" if i % 500 == 499 else "nn.relu", y, layer=f"l{i}")
    mod = module([x], y)
    result = partition(mod, lambda c: "cut" if c.op_name == "sigmoid" else None, limits=NO_LIMITS)
    assert len(result.regions) == 12 and sum(r.num_nodes for r in result.regions) == 6000 - 12


# --- strategies registry -------------------------------------------------------------------------

def test_strategies_are_listed_and_custom_ones_can_register():
    assert {"greedy", "max-offload", "min-transfer"} <= set(list_strategies())

    @register_strategy("test-each-call-alone", "one subgraph per supported call")
    def each_alone(graph, limits, cost):
        return StrategyOutcome([[c] for c in range(len(graph.calls)) if graph.supported(c)], {})

    mod, _ = diamond()
    result = partition(mod, lambda c: None, strategy="test-each-call-alone", limits=NO_LIMITS)
    assert len(result.regions) == 3
    same_outputs(mod, result.module)


def test_a_strategy_that_offloads_an_unsupported_call_is_caught():
    @register_strategy("test-offload-everything")
    def everything(graph, limits, cost):
        return StrategyOutcome([list(range(len(graph.calls)))], {})

    mod, _ = diamond()
    with pytest.raises(PartitionError, match="offloaded sigmoid 'B', which is not supported"):
        partition(mod, reject("B"), strategy="test-offload-everything")


# --- bad input ------------------------------------------------------------------------------------

def test_bad_options_name_the_option():
    mod, _ = diamond()
    with pytest.raises(PartitionError, match="unknown partition strategy 'gredy'; did you mean greedy"):
        partition(mod, lambda c: None, strategy="gredy")
    with pytest.raises(PartitionError, match="max_num_subgraphs must be an integer >= 0"):
        PartitionLimits(max_num_subgraphs=-1)
    with pytest.raises(PartitionError, match="max_subgraph_io"):
        PartitionLimits(max_subgraph_io=2.5)
    with pytest.raises(PartitionError, match="launch_s"):
        CostModel(launch_s=0)
    with pytest.raises(PartitionError, match="compiler name"):
        partition(mod, lambda c: None, compiler="ti dl")
    with pytest.raises(PartitionError, match="takes an IRModule or a Function"):
        partition("main", lambda c: None)


def test_bad_oracle_answers_name_the_call():
    mod, _ = diamond()
    with pytest.raises(PartitionError, match=r"returned True for nn.relu 'A'"):
        partition(mod, lambda c: True)
    with pytest.raises(PartitionError, match="returned '' for"):
        partition(mod, lambda c: "")


def test_groups_must_be_calls_of_main():
    mod, _ = diamond()
    stray = call("nn.relu", Var("z", TensorType((1, 4))), layer="stray")
    with pytest.raises(PartitionError, match="composite group 0 lists nn.relu 'stray'"):
        partition(mod, lambda c: None, groups=[[stray]])


def test_let_and_name_clashes_are_refused():
    x = Var("x", TensorType((1, 4)))
    v = Var("v", TensorType((1, 4)))
    with pytest.raises(PartitionError, match="binds %v with let"):
        partition(module([x], Let(v, call("nn.relu", x), v)), lambda c: None)
    mod, _ = diamond()
    y = Var("y", TensorType((1, 4)))
    mod["tidl_0"] = Function([y], call("nn.relu", y))
    with pytest.raises(PartitionError, match="already has a function @tidl_0"):
        partition(mod, lambda c: None, check=False)
