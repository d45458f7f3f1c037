"""``shared_walks``: rewrites in one block reuse the walk of a function an earlier rewrite of the
block swept without changing it, and a table whose rules can fire at no node skips its sweep.
Results are the same with and without the block."""

import numpy as np

import tidlx.ir as ir
import tidlx.ir.rewrite as rewrite_module
from tidlx.ir import Function, IRModule, TensorType, Var, call, const
from tidlx.ir.passes import PASSES
from tidlx.ir.pattern import is_constant, is_op, wildcard
from tidlx.ir.rewrite import RewriteTable, shared_walks
from tidlx.ir.transform import PassContext


def _model():
    x = Var("x", TensorType((1, 4, 8, 8)))
    w = const(np.ones((4, 4, 3, 3), "float32"))
    y = call("nn.conv2d", x, w, padding=(1, 1, 1, 1), channels=4, kernel_size=(3, 3), layer="conv")
    y = call("multiply", y, const(np.float32(1.0)), layer="times_one")   # RemoveIdentityOps drops it
    y = call("nn.relu", y, layer="relu")
    mod = IRModule({"main": Function([x], y)})
    mod.infer_types()
    return mod


def _counting_walks(monkeypatch):
    walked = []
    real = rewrite_module._walk_order

    def counting(root, enter_external):
        walked.append(root)
        return real(root, enter_external)

    monkeypatch.setattr(rewrite_module, "_walk_order", counting)
    return walked


def _prep(mod):
    ctx = PassContext()
    for name in ("ConvertMaxMinToClip", "MergePadIntoConv", "RemoveIdentityOps", "SplitAsymmetricStrideConv"):
        mod = PASSES[name].run(mod, ctx)
    return mod


def test_passes_that_change_nothing_share_one_walk(monkeypatch):
    walked = _counting_walks(monkeypatch)
    mod = _model()
    with shared_walks():
        out = _prep(mod)
    # ConvertMaxMinToClip, MergePadIntoConv and RemoveIdentityOps's first sweep share the walk of
    # @main; RemoveIdentityOps changes it and sweeps the new @main, whose walk the last pass reuses.
    assert len(walked) == 2
    assert walked[0] is mod["main"] and walked[1] is out["main"]
    walked.clear()
    plain = _prep(_model())
    assert len(walked) == 5  # without the block each sweep walks its own graph
    ir.assert_structural_equal(out, plain, compare_layers=True)


def test_a_table_with_no_rule_for_any_node_skips_the_sweep(monkeypatch):
    calls = []
    table = RewriteTable([("drop_tanh", is_op("tanh")(wildcard().named("x")), lambda m: calls.append(m) or m["x"])])
    real = table._candidates_of
    looked_up = []

    def spying(key):
        looked_up.append(key)
        return real(key)

    monkeypatch.setattr(table, "_candidates_of", spying)
    mod = _model()
    out = table.rewrite(mod)
    assert out["main"] is mod["main"] and not calls
    # one look-up per distinct candidate key (var, constant, the three ops), not one per node
    assert len(looked_up) == len(set(looked_up))


def test_a_rule_still_fires_inside_the_block():
    mod = _model()
    drop_one = RewriteTable([("times_one", is_op("multiply")(wildcard().named("x"), is_constant()),
                              lambda m: m["x"])])
    with shared_walks():
        out = drop_one.rewrite(mod)
        again = drop_one.rewrite(out)
    assert [c.op_name for c in ir.traversal.calls(out["main"].body)] == ["nn.conv2d", "nn.relu"]
    assert again["main"] is out["main"]
