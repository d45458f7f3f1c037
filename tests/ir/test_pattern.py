"""Pattern language and rewriter: matching, captures, alternatives, fixpoints, layers, big graphs."""

import numpy as np
import pytest

import tidlx.ir as ir
from tidlx.ir import TidlxError
from tidlx.ir.errors import OpAttributeError, UnknownOpError
from tidlx.ir.expr import Call, Constant, Function, Tuple, TupleGetItem, Var
from tidlx.ir.pattern import (PatternError, is_constant, is_expr, is_function, is_op, is_tuple,
                              is_tuple_get_item, is_var, wildcard)
from tidlx.ir.rewrite import RewriteError, RewriteTable, rewrite
from tidlx.ir.types import TensorType


def tvar(name, shape=(1, 4), dtype="float32"):
    return Var(name, TensorType(shape, dtype))


# -- matching --------------------------------------------------------------------------------

def test_op_pattern_matches_call_and_captures_args():
    x = tvar("x", (1, 3, 8, 8))
    w = ir.const(np.ones((4, 3, 3, 3), "float32"))
    conv = ir.call("nn.conv2d", x, w, padding=(1, 1))
    p = is_op("nn.conv2d")(wildcard().named("data"), is_constant().named("weight"))
    m = p.match(conv)
    assert m is not None
    assert m.expr is conv and m["data"] is x and m["weight"] is w
    assert set(m.names) == {"data", "weight"}


def test_non_matches():
    x, y = tvar("x"), tvar("y")
    add = ir.call("add", x, y)
    assert not is_op("subtract")(wildcard(), wildcard()).matches(add)
    # second argument is a variable, not a constant
    assert not is_op("add")(wildcard(), is_constant()).matches(add)
    assert not is_constant().matches(x)
    assert not is_var("z").matches(x)
    assert is_var("x").matches(x)
    assert not is_tuple([wildcard()]).matches(Tuple([x, y]))
    assert is_tuple([wildcard(), wildcard()]).matches(Tuple([x, y]))


def test_unapplied_op_pattern_matches_any_arguments_and_several_ops():
    x, y = tvar("x"), tvar("y")
    assert is_op("add").matches(ir.call("add", x, y))
    assert is_op("add", "subtract").matches(ir.call("subtract", x, y))
    assert not is_op("add", "subtract").matches(ir.call("multiply", x, y))
    assert is_op().matches(ir.call("nn.relu", x))
    assert not is_op().matches(x)


def test_alternatives_try_left_then_right():
    x = tvar("x")
    relu = ir.call("nn.relu", x)
    sig = ir.call("sigmoid", x)
    p = is_op("nn.relu")(wildcard()).named("act") | is_op("sigmoid")(wildcard()).named("act")
    assert p.match(relu)["act"] is relu
    assert p.match(sig)["act"] is sig
    assert p.match(ir.call("tanh", x)) is None


def test_alternative_backtracks_when_a_later_argument_fails():
    # The first alternative binds "a" to %x, which makes the second argument fail; the matcher
    # must retry with the second alternative, which binds "a" to the relu.
    x = tvar("x")
    relu = ir.call("nn.relu", x)
    expr = ir.call("add", relu, relu)
    a_first = is_op("nn.relu")(wildcard().named("a"))
    a_second = wildcard().named("a")
    p = is_op("add")(a_first | a_second, wildcard().named("a"))
    m = p.match(expr)
    assert m is not None and m["a"] is relu


def test_same_pattern_object_means_same_node():
    x, y = tvar("x"), tvar("y")
    same = wildcard()
    p = is_op("add")(same, same)
    assert p.matches(ir.call("add", x, x))
    assert not p.matches(ir.call("add", x, y))
    named = is_op("add")(wildcard().named("v"), wildcard().named("v"))
    assert named.matches(ir.call("add", y, y))
    assert not named.matches(ir.call("add", x, y))


def test_attribute_predicates():
    x = tvar("x", (1, 4, 8, 8))
    w = ir.const(np.ones((4, 1, 3, 3), "float32"))
    depthwise = ir.call("nn.conv2d", x, w, groups=4, padding=[1, 1])
    assert is_op("nn.conv2d").has_attr({"groups": 4}).matches(depthwise)
    assert not is_op("nn.conv2d").has_attr({"groups": 1}).matches(depthwise)
    # lists and tuples compare equal
    assert is_op("nn.conv2d")(wildcard(), wildcard()).has_attr({"padding": [1, 1]}).matches(depthwise)
    assert is_op("nn.conv2d").where(lambda c: c.args[1].data.shape[1] == 1).matches(depthwise)
    assert not is_op("nn.conv2d").where(lambda c: c.attrs.groups == 1).matches(depthwise)


def test_attribute_name_typo_is_an_error():
    with pytest.raises(OpAttributeError, match="did you mean groups"):
        is_op("nn.conv2d").has_attr({"group": 1})


def test_unknown_op_and_bad_arity_are_errors():
    with pytest.raises(UnknownOpError, match="nn.conv2d"):
        is_op("nn.conv2dd")
    with pytest.raises(PatternError, match="takes 2"):
        is_op("nn.conv2d")(wildcard())
    with pytest.raises(PatternError):
        is_op("add")(wildcard(), "x")
    assert isinstance(PatternError("x"), TidlxError)


def test_missing_capture_names_the_captures():
    x = tvar("x")
    m = is_op("nn.relu")(wildcard().named("inp")).match(ir.call("nn.relu", x))
    with pytest.raises(PatternError, match="captured: inp"):
        m["out"]


def test_type_predicates():
    x = tvar("x", (2, 8))
    h = tvar("h", (2, 8), "float16")
    assert wildcard().has_shape((2, 8)).matches(x)
    assert wildcard().has_shape((None, 8)).matches(x)
    assert not wildcard().has_shape((2, 9)).matches(x)
    assert wildcard().has_dtype("float16").matches(h)
    assert not wildcard().has_dtype("float16").matches(x)
    assert wildcard().has_rank(2).matches(x)
    # a call's type is inferred on demand
    assert is_op("nn.relu").has_shape((2, 8)).matches(ir.call("nn.relu", x))
    assert wildcard().has_type(TensorType((2, 8), "float32")).matches(x)


def test_tuple_get_item_and_optional():
    x = tvar("x", (1, 4))
    params = [ir.const(np.ones(4, "float32")) for _ in range(4)]
    bn = ir.call("nn.batch_norm", x, *params)
    item0, item1 = TupleGetItem(bn, 0), TupleGetItem(bn, 1)
    p = is_tuple_get_item(is_op("nn.batch_norm").named("bn"), 0)
    assert p.match(item0)["bn"] is bn
    assert not p.matches(item1)
    assert is_tuple_get_item(is_op("nn.batch_norm")).matches(item1)
    relu_opt = is_op("nn.dense")(wildcard(), wildcard()).optional(lambda p: is_op("nn.relu")(p))
    w = ir.const(np.ones((3, 4), "float32"))
    dense = ir.call("nn.dense", x, w)
    assert relu_opt.matches(dense)
    assert relu_opt.matches(ir.call("nn.relu", dense))
    assert not relu_opt.matches(ir.call("nn.relu", x))


def test_commutative_and_expr_and_function_patterns():
    x = tvar("x")
    c = ir.const(np.ones(4, "float32"))
    p = is_op("multiply")(wildcard().named("x"), is_constant().named("c")).commutative()
    assert p.match(ir.call("multiply", c, x))["x"] is x
    assert p.match(ir.call("multiply", x, c))["c"] is c
    assert is_expr(x).matches(x) and not is_expr(x).matches(tvar("x"))
    fn = Function([x], ir.call("nn.relu", x), attrs={"Compiler": "tidl"})
    assert is_function(is_op("nn.relu")).has_attr({"Compiler": "tidl"}).matches(fn)
    assert not is_function().has_attr({"Compiler": "cmsisnn"}).matches(fn)


# -- rewriting -------------------------------------------------------------------------------

def _is_scalar_one(c):
    return isinstance(c, Constant) and c.data.size == 1 and float(c.data.reshape(-1)[0]) == 1.0


DROP_MUL_ONE = RewriteTable([
    (is_op("multiply")(wildcard().named("x"), is_constant().where(_is_scalar_one)), lambda m: m["x"]),
], name="DropMultiplyByOne")


def test_rewrite_bottom_up_and_fixpoint():
    x = tvar("x")
    one = ir.const(1.0)
    expr = ir.call("nn.relu", ir.call("multiply", ir.call("multiply", x, one), one))
    out = rewrite(DROP_MUL_ONE, expr)
    assert ir.structural_equal(out, ir.call("nn.relu", x))
    # the input is untouched
    assert expr.args[0].op_name == "multiply"


def test_rewrite_module_returns_new_module_and_skips_external_functions():
    x = tvar("x")
    one = ir.const(1.0)
    main = Function([x], ir.call("multiply", x, one))
    y = tvar("y")
    ext = Function([y], ir.call("multiply", y, one), attrs={"Compiler": "tidl"})
    mod = ir.IRModule({"main": main, "tidl_0": ext})
    out = DROP_MUL_ONE.rewrite(mod)
    assert out is not mod
    assert out.main.body is out.main.params[0]
    assert out["tidl_0"] is ext
    assert mod.main is main


def test_replacement_keeps_layer_of_replaced_call():
    x = tvar("x")
    c = ir.const(np.full(4, 2.0, "float32"))
    d = ir.const(np.full(4, 3.0, "float32"))
    # a * 2 * 3 -> a * 6 ; the new multiply keeps the outer call's layer
    expr = ir.call("multiply", ir.call("multiply", x, c, layer="inner"), d, layer="outer")
    p = is_op("multiply")(is_op("multiply")(wildcard().named("x"), is_constant().named("a")),
                          is_constant().named("b"))
    table = RewriteTable([(p, lambda m: ir.call("multiply", m["x"], ir.const(m["a"].data * m["b"].data)))])
    out = rewrite(table, expr)
    assert out.op_name == "multiply" and out.layer == "outer"
    np.testing.assert_array_equal(out.args[1].data, np.full(4, 6.0, "float32"))
    # a layer set by the rule wins
    table2 = RewriteTable([(p, lambda m: ir.call("multiply", m["x"], ir.const(m["a"].data * m["b"].data),
                                                  layer="mine"))])
    assert rewrite(table2, expr).layer == "mine"


def test_new_inner_calls_get_the_layer_but_existing_nodes_keep_theirs():
    x = tvar("x")
    pre = ir.call("nn.relu", x, layer="pre")
    expr = ir.call("sigmoid", pre, layer="act")
    # sigmoid(y) -> multiply(y, sigmoid(y)) just to create two new calls around an old node
    table = RewriteTable([(is_op("sigmoid")(is_op("nn.relu").named("y")),
                           lambda m: ir.call("multiply", m["y"], ir.call("tanh", m["y"])))])
    out = rewrite(table, expr)
    assert out.layer == "act" and out.args[1].layer == "act"
    assert out.args[0] is pre and out.args[0].layer == "pre"


def test_non_converging_table_raises_clear_error():
    x = tvar("x")
    # relu(x) -> relu(x) rebuilt each time: always "changes", never converges
    table = RewriteTable([(is_op("nn.relu")(wildcard().named("x")), lambda m: ir.call("nn.relu", m["x"]))],
                         name="Spin")
    with pytest.raises(RewriteError, match="Spin"):
        rewrite(table, ir.call("nn.relu", x), max_sweeps=5)


def test_ping_pong_rules_hit_the_sweep_cap():
    x = tvar("x")
    to_sig = (is_op("nn.relu")(wildcard().named("x")), lambda m: ir.call("sigmoid", m["x"]))
    to_relu = (is_op("sigmoid")(wildcard().named("x")), lambda m: ir.call("nn.relu", m["x"]))
    # Both directions in one table flip the same node forever.
    with pytest.raises(RewriteError, match="rules keep replacing|did not reach a fixpoint"):
        rewrite(RewriteTable([to_sig, to_relu], name="PingPong"), ir.call("nn.relu", x), max_local=8)


def test_type_changing_rule_is_refused():
    x = tvar("x", (1, 4))
    w = ir.const(np.ones((3, 4), "float32"))
    table = RewriteTable([(is_op("nn.dense")(wildcard().named("x"), wildcard()), lambda m: m["x"])],
                         name="BadRule")
    with pytest.raises(RewriteError, match=r"changed the type.*\(1, 4\)"):
        rewrite(table, ir.call("nn.dense", x, w))


def test_ill_typed_replacement_is_refused():
    x = tvar("x", (1, 4))
    bad_w = ir.const(np.ones((3, 5), "float32"))
    table = RewriteTable([(is_op("nn.relu")(wildcard().named("x")),
                           lambda m: ir.call("nn.dense", m["x"], bad_w))], name="Illtyped")
    with pytest.raises(RewriteError, match="ill-typed"):
        rewrite(table, ir.call("nn.relu", x))


def test_rule_returning_garbage_and_bad_tables_are_errors():
    x = tvar("x")
    table = RewriteTable([(is_op("nn.relu"), lambda m: 42)], name="Garbage")
    with pytest.raises(RewriteError, match="returned int"):
        rewrite(table, ir.call("nn.relu", x))
    with pytest.raises(RewriteError):
        RewriteTable([(lambda m: None, is_op("nn.relu"))])
    with pytest.raises(RewriteError):
        RewriteTable(["not a rule"])


def test_declining_rule_lets_later_rules_fire_and_first_rule_wins():
    x = tvar("x")
    fired = []
    table = RewriteTable([
        ("decline", is_op("nn.relu"), lambda m: fired.append("decline")),
        ("first", is_op("nn.relu")(wildcard().named("x")), lambda m: ir.call("sigmoid", m["x"])),
        ("second", is_op("nn.relu")(wildcard().named("x")), lambda m: ir.call("tanh", m["x"])),
    ])
    out = rewrite(table, ir.call("nn.relu", x))
    assert out.op_name == "sigmoid" and fired


def test_users_are_visible_to_rules():
    x = tvar("x")
    shared = ir.call("nn.relu", x)
    single = ir.call("sigmoid", x)
    expr = Tuple([ir.call("tanh", shared), ir.call("exp", shared), ir.call("tanh", single)])
    seen = {}

    def record(m):
        seen[m["a"].op_name] = m.num_users(m["a"])
        return None

    rewrite(RewriteTable([(is_op("tanh")(wildcard().named("a")), record)]), expr)
    assert seen == {"nn.relu": 2, "sigmoid": 1}


def test_ten_thousand_node_chain_without_recursion_errors():
    x = tvar("x")
    one = ir.const(1.0)
    node = x
    for i in range(5000):
        node = ir.call("nn.relu", node, layer=f"relu{i}")
        node = ir.call("multiply", node, one, layer=f"mul{i}")
    out = rewrite(DROP_MUL_ONE, Function([x], node))
    count, cur = 0, out.body
    while isinstance(cur, Call):
        assert cur.op_name == "nn.relu"
        count += 1
        cur = cur.args[0]
    assert count == 5000 and cur is x
    assert out.body.layer == "relu4999"
