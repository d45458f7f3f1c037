"""ConvertTanhgeluToErfgelu: the tanh approximation of GELU,
``0.5 * x * (1 + tanh(0.79788 * (x + 0.044715 * x*x*x)))``, becomes the erf form by replacing
its tanh term with ``erf(x / 1.4142135)`` (TI's model optimizer rule ``convert_tanhgelu_to_erfgelu``,
on by default in TI's runner). TIDL runs the erf form as its GELU activation.

    %0 = multiply(x, x); %1 = multiply(%0, x);             # x*x*x
    %2 = multiply(%1, 0.044715f); %3 = add(x, %2);
    %4 = multiply(%3, 0.797885f); tanh(%4)
    ->
    erf(divide(x, 1.41421f))

As TI's rule: the cube is a chain of multiplies (a ``power(x, 3)`` is not taken), the tanh's
input is a multiply of the sum ``x + c * x^3``; what uses the tanh (the ``1 +`` and the
multiplies by x and 0.5) stays. TI's rule checks only that structure; tidlx also checks the two
constants (sqrt(2/pi) and 0.044715, to 1e-4), so an unrelated tanh of that shape is left alone.
The new calls take the tanh's layer name.

Exactness: not exact. The tanh form approximates the erf form to within about 5e-4 (absolute,
on the GELU's output); TI says the same (bitwise outputs change, accuracy should not).
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from ..expr import Call, Constant, Expr
from ..op import call
from ..pattern import is_op
from ..rewrite import RewriteTable
from ..transform import module_pass

#: TI's name of the rule.
TI_RULE = "convert_tanhgelu_to_erfgelu"

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_CUBIC = 0.044715
#: TI's divisor (sqrt 2 as a float32).
SQRT_2 = 1.4142135381698608


def _scalar(expr: Expr, value: float) -> bool:
    return isinstance(expr, Constant) and expr.data.size == 1 and \
        abs(float(np.asarray(expr.data).reshape(-1)[0]) - value) <= 1e-4


def _split(expr: Expr, op: str, value: float):
    """The other operand of ``op(other, constant value)`` in either order, else None."""
    if not isinstance(expr, Call) or expr.op_name != op:
        return None
    a, b = expr.args
    if _scalar(b, value):
        return a
    if _scalar(a, value):
        return b
    return None


def _is_mul(expr: Expr, a: Expr, b: Expr) -> bool:
    return isinstance(expr, Call) and expr.op_name == "multiply" and \
        ((expr.args[0] is a and expr.args[1] is b) or (expr.args[0] is b and expr.args[1] is a))


def _is_cube_of(expr: Expr, x: Expr) -> bool:
    if not isinstance(expr, Call) or expr.op_name != "multiply":
        return False
    for square, other in ((expr.args[0], expr.args[1]), (expr.args[1], expr.args[0])):
        if other is x and _is_mul(square, x, x):
            return True
    return False


def gelu_input(tanh: Call) -> Optional[Expr]:
    """The x of a tanh-form GELU whose tanh is ``tanh``, else None."""
    if not isinstance(tanh, Call) or tanh.op_name != "tanh":
        return None
    total = _split(tanh.args[0], "multiply", _SQRT_2_OVER_PI)
    if not isinstance(total, Call) or total.op_name != "add":
        return None
    for x, term in ((total.args[0], total.args[1]), (total.args[1], total.args[0])):
        cube = _split(term, "multiply", _CUBIC)
        if cube is not None and _is_cube_of(cube, x):
            return x
    return None


def _convert(m):
    tanh = m.expr
    x = gelu_input(tanh)
    if x is None:
        return None
    dtype = tanh.checked_type.dtype
    scaled = call("divide", x, Constant(np.array(SQRT_2, dtype=dtype)), layer=tanh.layer)
    return call("erf", scaled, layer=tanh.layer)


CONVERT_TANHGELU_TO_ERFGELU = RewriteTable([
    ("tanh_of_gelu", is_op("tanh"), _convert),
], name="ConvertTanhgeluToErfgelu")


@module_pass("ConvertTanhgeluToErfgelu", opt_level=0)
def convert_tanhgelu_to_erfgelu(mod, ctx):
    """Replaces the tanh term of a tanh-form GELU by erf(x / sqrt 2) (TI's
    convert_tanhgelu_to_erfgelu)."""
    return CONVERT_TANHGELU_TO_ERFGELU.rewrite(mod)


ConvertTanhgeluToErfgelu = convert_tanhgelu_to_erfgelu

__all__ = ["ConvertTanhgeluToErfgelu", "CONVERT_TANHGELU_TO_ERFGELU", "gelu_input", "SQRT_2", "TI_RULE"]
