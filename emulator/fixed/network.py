"""The quantized TIDL subgraph as plain data: what the fixed-point kernels run and the artifact writer
will serialize.

    sub.layers[i].type, .weights (int8/int16), .bias_a, .bias_b, .round_bits, .bounds, .attrs
    sub.tensors[t].bits, .signed, .scale (tensorScale), .element_type (TIDL's id)

Only numbers, strings, tuples and numpy arrays: no IR node, nothing of the TIDL backend. The TIDL
backend builds it (``tidlx.backends.tidl.quantize``); ``layers.run_subgraph`` runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Tuple, Union

import numpy as np

from .arith import ELEMENT_TYPE_IDS, FixedType


@dataclass(frozen=True)
class QuantizedTensor:
    """A tensor of the subgraph: fixed point (``bits`` 8/16, ``signed``, ``scale`` = tensorScale, a real
    value is ``q / scale``) or float32 (``bits`` 0: softmax's output)."""

    id: int
    name: str
    shape: Tuple[int, ...]
    bits: int
    signed: bool
    scale: float
    #: the zero point of the asymmetric style (docs/numerics.md §12.2): a real value is ``(q - zp) / scale``
    zero_point: int = 0

    @property
    def is_float(self) -> bool:
        return self.bits == 0

    @property
    def fixed_type(self) -> FixedType:
        return FixedType(self.bits, self.signed)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float32) if self.is_float else self.fixed_type.dtype

    @property
    def element_type(self) -> int:
        """TIDL's element type id (docs/numerics.md §1.2)."""
        return ELEMENT_TYPE_IDS["F32"] if self.is_float else self.fixed_type.type_id

    @classmethod
    def float32(cls, id: int, name: str, shape) -> "QuantizedTensor":
        return cls(id, name, tuple(shape), 0, True, 1.0)


@dataclass(frozen=True, eq=False)
class QuantizedLayer:
    """One layer with everything its integer kernel needs.

    ``type``/``type_id``: TI's layer type (Conv 1, ...; ``Data`` for the subgraph's inputs and
    outputs, whose kernels are the data converts). ``attrs``: geometry as plain values (strides,
    pads, dilations, groups, kernel, pool_type, eltwise_type, axis, ratios, mode, perm, slices, q).
    ``weights``: quantized weights (int8/int16) with ``weight_bits`` and their ``weight_scale``;
    ``bias_a`` x ``bias_b`` the bias in the accumulator domain (docs/numerics.md §5.4) with
    ``bias_scale``; ``round_bits`` (an int, or one per output channel); ``multipliers`` the integer
    input multipliers of sum/max/concat (§6.5); ``acc_scale`` the accumulator's scale; ``bounds``
    the final saturation [lo, hi] (the output type's narrowed by ``activation``, §8.10);
    ``notes`` what quantization had to do (a clipped weight scale, a raised roundBits).

    Optional fields (default None: the layer has none of it):

    * ``activation_table`` (int64, one entry per value of the pre-activation type, lowest first): a
      sigmoid/tanh layer (§8.10.2). ``round_bits`` then requantizes the accumulator to the
      *pre-activation* tensor: signed, the output's width, scale ``pre_scale`` (= accScale /
      2^roundBits), saturated to its type only; the output is ``table[pre - lo]``.
    * ``prelu_slopes`` (int64 slope factors, one per channel or one for all) with ``prelu_shift`` (8 for
      8-bit weights, 16 for 16-bit): a PReLU / leaky ReLU (§8.10.1). A negative accumulator becomes
      ``(acc * factor) >> prelu_shift`` before the layer's one roundSat to its output type. A standalone
      PReLU layer holds TI's batch norm of weight 1.0 (``weights``, ``bias_a`` 0, ``bias_b`` 1).
    * ``table_on_input`` True: a standalone Sigmoid/Tanh layer with TI's table (§8.10.2, TIDL 10.x/11.x,
      8-bit): ``activation_table`` has one entry per value of the *input's* type and the output is
      ``table[x - lo]`` (no requantization; ``round_bits`` 0, ``pre_scale`` the input's scale).
    * ``per_channel`` True: ``weight_scale`` and ``round_bits`` are arrays, one per output channel
      (per-channel depthwise weights, §4.5, §8.1.1).
    * ``mma_scale`` / ``mma_shift`` (style 4, §12): the layer requantizes by these multipliers and right
      shifts instead of ``round_bits`` (one per output channel for Conv/InnerProduct, one for a sum or a
      global average pool); ``bias_a`` holds the accumulator's constant (zero-point terms folded in,
      ``bias_b`` ones), a sum's ``multipliers`` its input multipliers. The plain kernels run it.

    For these layers, a kernel of the weighted types (Conv, Deconv, InnerProduct, BatchNorm) runs its
    accumulator rule with the pre-activation type and then the activation (layers.py: ``activate``)."""

    index: int
    name: str
    type: str
    type_id: int
    inputs: Tuple[int, ...]
    outputs: Tuple[int, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    activation: str = "none"
    weights: Optional[np.ndarray] = None
    weight_bits: int = 0
    weight_scale: Union[None, float, np.ndarray] = None
    bias_a: Optional[np.ndarray] = None
    bias_b: Optional[np.ndarray] = None
    bias_scale: float = 0.0
    round_bits: Union[int, np.ndarray] = 0
    multipliers: Tuple[int, ...] = ()
    acc_scale: float = 0.0
    bounds: Optional[Tuple[int, int]] = None
    notes: Tuple[str, ...] = ()
    activation_table: Optional[np.ndarray] = None
    pre_scale: Optional[float] = None
    prelu_slopes: Optional[np.ndarray] = None
    prelu_shift: int = 0
    per_channel: bool = False
    table_on_input: bool = False
    mma_scale: Union[None, int, np.ndarray] = None
    mma_shift: Union[None, int, np.ndarray] = None

    @property
    def asymmetric(self) -> bool:
        """A style-4 layer (docs/numerics.md §12): requantized by ``mma_scale``/``mma_shift``."""
        return self.mma_scale is not None

    def describe(self) -> str:
        return f"'{self.name}' ({self.type}{'+' + self.activation if self.activation != 'none' else ''})"


@dataclass(frozen=True, eq=False)
class QuantizedSubgraph:
    """One TIDL subgraph in fixed point: layers in execution order (Data layers first and last),
    tensors by id, the input and output tensor ids in the subgraph function's parameter / result
    order, and whether the function returns a tuple. ``tensor_bits`` and ``quantization_style``
    (2 NP2Fixed, 3 P2Dynamic, 6 AsymNP2) as chosen at import."""

    name: str
    layers: Tuple[QuantizedLayer, ...]
    tensors: Tuple[QuantizedTensor, ...]
    inputs: Tuple[int, ...]
    outputs: Tuple[int, ...]
    returns_tuple: bool
    tensor_bits: int
    quantization_style: int

    def layer(self, name: str) -> QuantizedLayer:
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(f"@{self.name} has no layer '{name}'")

    def compute_layers(self) -> Tuple[QuantizedLayer, ...]:
        return tuple(layer for layer in self.layers if layer.type != "Data")


__all__ = ["QuantizedTensor", "QuantizedLayer", "QuantizedSubgraph"]
