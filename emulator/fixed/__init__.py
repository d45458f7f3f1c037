"""TIDL's fixed-point arithmetic (docs/numerics.md §7, §8): the runtime integer rules, one function per
rule in ``arith.py``. The fixed-point kernel set that runs TIDL layers in the interpreter will call them."""

from .arith import (ELEMENT_TYPE_IDS, SOFTMAX_LANES, FixedPointError, FixedType, accumulator_bits,
                    activation_bounds, average_pool, average_pool_multiplier, batch_norm, bias_multiply, concat,
                    convolution, data_convert_to_fixed, data_convert_to_float, deconvolution, element_type_id,
                    eltwise_max, eltwise_product, eltwise_sum, global_average_pool, global_average_pool_multiplier,
                    inner_product, lookup_activation, max_pool, pad_with_zero_point, prelu, depth_to_space,
                    pool_accumulator_bits, product_accumulator_bits,
                    requantize_16bit_to_8bit, resize_bilinear, resize_nearest, round_sat, saturation_bounds,
                    softmax, wrap_accumulator)

__all__ = ["ELEMENT_TYPE_IDS", "SOFTMAX_LANES", "FixedPointError", "FixedType", "accumulator_bits",
           "activation_bounds", "average_pool", "average_pool_multiplier", "batch_norm", "bias_multiply", "concat",
           "convolution", "data_convert_to_fixed", "data_convert_to_float", "deconvolution", "element_type_id",
           "eltwise_max", "eltwise_product", "eltwise_sum", "global_average_pool", "global_average_pool_multiplier",
           "inner_product", "lookup_activation", "max_pool", "pad_with_zero_point", "prelu", "depth_to_space",
           "pool_accumulator_bits", "product_accumulator_bits",
           "requantize_16bit_to_8bit", "resize_bilinear", "resize_nearest", "round_sat", "saturation_bounds",
           "softmax", "wrap_accumulator"]
