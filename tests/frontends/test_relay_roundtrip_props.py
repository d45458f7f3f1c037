"""Property tests: random well-typed modules print -> parse back structurally equal (with
layers), and printing is deterministic (the same module, and the parsed copy, print to the same
bytes)."""

from __future__ import annotations

import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidlx.frontends.relay import parse
from tidlx.ir import Call, Constant, Function, GlobalVar, Let, TensorType, Tuple, TupleGetItem, Var, call, const
from tidlx.ir.errors import TidlxWarning
from tidlx.ir.module import IRModule
from tidlx.ir.structural import structural_equal
from tidlx.ir.type_infer import infer_expr_type

NAMES = st.sampled_from(["x", "x", "x1", "input.1", "onnx::Conv_193", "fc.weight", "a/b/c", "0", "_y",
                         "data", "weird name", "é", "v", "x.0", "%p", "meta_const_0"])
LAYERS = st.one_of(
    st.none(),
    st.sampled_from(["/conv1/Conv", "logits@@/fc/Gemm", "Conv_0.1", "onnx::Conv_193", "a:1:2", "",
                     "with space", 'say "hi"', "x */ y", "x /* y", "tab\there", "ünï"]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12),
)
FLOATS = st.floats(allow_nan=False, width=32)
SCALAR_DTYPES = ["float32", "float16", "float64", "int32", "int64", "int16", "int8", "uint8", "uint16",
                 "uint32", "uint64", "bool"]


def scalar_const(draw, dtype: str):
    if dtype == "bool":
        return Constant(np.array(draw(st.booleans()), np.bool_))
    if dtype.startswith("float"):
        width = {"float16": 16, "float32": 32, "float64": 64}[dtype]
        return Constant(np.array(draw(st.floats(allow_nan=False, width=width)), dtype))
    info = np.iinfo(dtype)
    return Constant(np.array(draw(st.integers(int(info.min), int(info.max))), dtype))


class Body:
    """Grows a function body: a pool of typed expressions that new nodes draw their inputs from."""

    def __init__(self, draw, params, helpers, mod, depth):
        self.draw = draw
        self.pool = list(params)
        self.helpers = helpers
        self.mod = mod
        self.depth = depth
        self.lets = []  # (var, value) in binding order

    def ty(self, expr):
        return infer_expr_type(expr, self.mod)

    def pick(self, pred=lambda t: True):
        choices = [e for e in self.pool if pred(self.ty(e))]
        return self.draw(st.sampled_from(choices)) if choices else None

    def add(self, expr):
        self.ty(expr)  # must type-check
        self.pool.append(expr)
        return expr

    def layer(self):
        return self.draw(LAYERS)

    def step(self):
        draw = self.draw
        is4d = lambda t: isinstance(t, TensorType) and t.ndim == 4 and t.dtype == "float32"  # noqa: E731
        kind = draw(st.sampled_from(["unary", "binary", "conv", "dense", "reshape", "concat", "tuple",
                                     "let", "closure", "global", "scalar", "tensor_const", "float_attrs"]))
        x = self.pick(is4d)
        if x is None:
            return
        t = self.ty(x)
        if kind == "unary":
            op = draw(st.sampled_from(["nn.relu", "sigmoid", "tanh", "exp", "negative", "abs", "copy"]))
            self.add(call(op, x, layer=self.layer()))
        elif kind == "binary":
            op = draw(st.sampled_from(["add", "subtract", "multiply", "maximum", "minimum"]))
            other = self.pick(lambda u: u == t)
            if draw(st.booleans()):
                other = const(np.asarray(draw(st.lists(FLOATS, min_size=t.shape[1], max_size=t.shape[1])),
                                         np.float32).reshape(t.shape[1], 1, 1))
            self.add(call(op, x, other, layer=self.layer()))
        elif kind == "conv":
            out_ch = draw(st.integers(1, 4))
            pad = draw(st.integers(0, 1))
            k = draw(st.sampled_from([1, 3] if t.shape[2] + 2 * pad >= 3 else [1]))
            stride = draw(st.integers(1, 2))
            weight = const(np.arange(out_ch * t.shape[1] * k * k, dtype=np.float32).reshape(out_ch, t.shape[1], k, k))
            attrs = {"strides": (stride, stride), "padding": (pad,) * 4}
            if draw(st.booleans()):
                attrs.update(channels=out_ch, kernel_size=(k, k))
            self.add(call("nn.conv2d", x, weight, layer=self.layer(), **attrs))
        elif kind == "dense":
            flat = call("reshape", x, newshape=(1, -1))
            units = draw(st.integers(1, 5))
            features = self.ty(flat).shape[1]
            weight = const(np.ones((units, features), np.float32) * draw(FLOATS))
            dense = call("nn.dense", flat, weight, units=units if draw(st.booleans()) else None, layer=self.layer())
            self.ty(dense)
            # back to 4-D so later steps can use it
            self.add(call("reshape", dense, newshape=(1, units, 1, 1), layer=self.layer()))
        elif kind == "reshape":
            self.add(call("reshape", x, newshape=(0, -1, t.shape[3]), layer=self.layer()))
        elif kind == "concat":
            other = self.pick(lambda u: is4d(u) and u.shape[2:] == t.shape[2:])
            self.add(call("concatenate", Tuple([x, other]), axis=1, layer=self.layer()))
        elif kind == "tuple":
            other = self.pick()
            tup = Tuple([x, other]) if draw(st.booleans()) else Tuple([x])
            self.add(TupleGetItem(tup, draw(st.integers(0, len(tup.fields) - 1))))
            if draw(st.booleans()):
                self.add(tup)
        elif kind == "let":
            var = Var(draw(NAMES), t if draw(st.booleans()) else None)
            value = call("nn.relu", x, layer=self.layer()) if draw(st.booleans()) else x
            self.ty(value)
            self.lets.append((var, value))
            var._set_checked_type(t)
            self.pool.append(var)
        elif kind == "closure" and self.depth < 2:
            params = [Var(draw(NAMES), t)]
            inner = Body(draw, params, [], self.mod, self.depth + 1)
            for _ in range(draw(st.integers(1, 3))):
                inner.step()
            attrs = draw(st.sampled_from([{}, {"Composite": "tidl.conv_relu", "PartitionedFromPattern": "x_"},
                                          {"Primitive": 1, "Inline": 1}]))
            fn = Function(params, inner.result(), None if draw(st.booleans()) else None, attrs)
            call_attrs = {"name": "call_attrs"} if draw(st.booleans()) else None
            first = Call(fn, [x], call_attrs, self.layer())
            self.add(first)
            if draw(st.booleans()):  # a closure bound once and called twice
                self.add(Call(fn, [first if self.ty(first) == t else x], None, self.layer()))
        elif kind == "global" and self.helpers:
            name, helper = draw(st.sampled_from(self.helpers))
            if helper.params[0].type_annotation == t:
                self.add(Call(GlobalVar(name), [x], None, self.layer()))
        elif kind == "scalar":
            dtype = draw(st.sampled_from(SCALAR_DTYPES))
            if dtype == "bool":
                cmp = call("greater", x, x, layer=self.layer())
                self.ty(cmp)
                out = call("logical_and", cmp, scalar_const(draw, "bool"))
                self.ty(out)
                self.add(call("cast", out, dtype="float32"))
            else:
                cast = call("cast", x, dtype=dtype) if dtype != "float32" else x
                out = call("add", cast, scalar_const(draw, dtype), layer=self.layer())
                self.ty(out)
                self.add(call("cast", out, dtype="float32") if dtype != "float32" else out)
        elif kind == "tensor_const":
            dtype = draw(st.sampled_from(["float32", "float16", "int8", "uint8", "int32", "int64", "bool"]))
            shape = (t.shape[1], 1, 1)
            data = np.arange(t.shape[1]).reshape(shape).astype(dtype)
            if dtype == "bool":
                out = call("logical_or", call("greater", x, x), Constant(data))
            else:
                out = call("multiply", call("cast", x, dtype=dtype), Constant(data))
            self.ty(out)
            self.add(call("cast", out, dtype="float32", layer=self.layer()))
        elif kind == "float_attrs":
            op = draw(st.sampled_from(["nn.leaky_relu", "clip"]))
            if op == "clip":
                lo, hi = sorted([draw(FLOATS), draw(FLOATS)])
                self.add(call("clip", x, a_min=lo, a_max=hi, layer=self.layer()))
            else:
                self.add(call("nn.leaky_relu", x, alpha=draw(FLOATS), layer=self.layer()))

    def result(self):
        draw = self.draw
        candidates = [e for e in self.pool if not isinstance(e, Var) or draw(st.booleans())] or self.pool
        body = draw(st.sampled_from(candidates[-3:]))
        if len(self.pool) > 1 and draw(st.booleans()):
            body = Tuple([body, self.pool[-1]])
        return self.wrap_lets(body)

    def wrap_lets(self, body):
        for var, value in reversed(self.lets):
            body = Let(var, value, body)
        return body


@st.composite
def modules(draw):
    mod = IRModule()
    helpers = []
    for i in range(draw(st.integers(0, 2))):
        c = draw(st.integers(1, 3))
        params = [Var(draw(NAMES), TensorType((1, c, 4, 4), "float32"))]
        body = Body(draw, params, list(helpers), mod, 0)
        for _ in range(draw(st.integers(1, 4))):
            body.step()
        last = body.pool[-1] if infer_expr_type(body.pool[-1], mod) == params[0].type_annotation else params[0]
        result = body.wrap_lets(call("nn.relu", last, layer=draw(LAYERS)))
        fn = Function(params, result, params[0].type_annotation if draw(st.booleans()) else None,
                      draw(st.sampled_from([{}, {"Compiler": "tidl", "Primitive": 1, "Inline": 1,
                                                 "global_symbol": f"tvmgen_default_tidl_main_{i}"}])))
        name = f"tvmgen_default_tidl_main_{i}"
        mod[name] = fn
        helpers.append((name, fn))
    params = [Var(draw(NAMES), TensorType((1, draw(st.integers(1, 3)), 4, 4), "float32"))
              for _ in range(draw(st.integers(1, 2)))]
    body = Body(draw, params, helpers, mod, 0)
    for _ in range(draw(st.integers(1, 12))):
        body.step()
    mod["main"] = Function(params, body.result(), None, {})
    return mod


def parse_quietly(text):
    with warnings.catch_warnings():
        warnings.simplefilter("error", TidlxWarning)  # with metadata shown, nothing may be missing
        return parse(text)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modules())
def test_print_parse_round_trip_is_structurally_equal(mod):
    text = mod.astext(show_meta_data=True)
    again = parse_quietly(text)
    assert structural_equal(mod, again, compare_layers=True), text
    # deterministic: the same module prints the same bytes, and so does its parsed copy
    assert mod.astext(show_meta_data=True) == text
    assert again.astext(show_meta_data=True) == text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modules())
def test_text_without_metadata_parses_with_constants_as_typed_parameters(mod):
    text = mod.astext(show_meta_data=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TidlxWarning)
        again = parse(text)
    for name, fn in again.items():
        original = mod[name]
        extra = fn.params[len(original.params):]
        assert all(p.name_hint.startswith("meta_const_") and p.type_annotation is not None for p in extra)
        assert fn.body.has_type
        assert fn.body.checked_type == original.body.checked_type
