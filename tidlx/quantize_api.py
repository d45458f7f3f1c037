"""The public fixed-point entry points: ``tidlx.quantize`` and ``tidlx.emulate`` on a quantized model.

    qmodel = tidlx.quantize(mod, {"tensor_bits": 8}, calib="frames.npz")
    outs = tidlx.emulate(qmodel, {"img": frame})           # TIDL subgraphs in fixed point, host in float
    outs = tidlx.emulate(mod, inputs, mode="fixed", options={...}, calib=...)   # the one-call form
    result = tidlx.compare(mod, options={"tensor_bits": 8}, calib="frames.npz")  # float vs fixed, per layer
"""

from __future__ import annotations

from typing import Mapping, Optional

from .ir import IRModule, TidlxError
from . import api as _api


def _is_partitioned(mod: IRModule) -> bool:
    return any(fn.attrs.get("Compiler") == "tidl" for _, fn in mod.items())


def quantize(mod: IRModule, options=None, calib=None, *, calibration_kernels: str = "reference", mean=None,
             scale=None, progress=None):
    """Partitions ``mod`` for TIDL (unless it holds ``Compiler="tidl"`` subgraphs already), calibrates
    once and quantizes every subgraph; returns a ``QuantizedModel``.

    ``options``: TI's compile options as for ``tidlx.partition`` (``tensor_bits``, ``accuracy_level``,
    ``advanced_options:quantization_scale_type``, ``advanced_options:calibration_frames``, ...).
    ``calib``: calibration frames: a path (``.npz`` of arrays by input name, frames on the batch axis,
    or a folder of images), a mapping of arrays, or None for seeded random frames (with a warning).
    ``mean``/``scale``: a folder's per-channel preprocessing ``(x - mean) * scale`` (TI's
    ``input_mean``/``input_scale``). ``progress(stage, done, total)``: the stages ``partition``,
    ``calibration`` (after each frame of the float pass) and ``quantize`` (0 of 1 at its start, then after
    each frame of each fixed-point calibration iteration; 1 of 1 when there is none).
    """
    from .backends.tidl.calibration import calibrate, _options
    from .backends.tidl.quantize import quantize_model

    if not isinstance(mod, IRModule):
        raise TidlxError(f"tidlx.quantize takes an IRModule (tidlx.load gives one), got {type(mod).__name__}")
    step = progress if progress is not None else (lambda stage, done, total: None)
    opts = _options(options)
    step("partition", 0, 1)
    partitioned = mod if _is_partitioned(mod) else _api.partition(mod, options)[0]   # with disabled_passes
    step("partition", 1, 1)
    results = calibrate(partitioned, opts, calib, kernels=calibration_kernels, mean=mean, scale=scale,
                        progress=lambda done, total: step("calibration", done, total))
    step("quantize", 0, 1)
    steps = []
    qmodel = quantize_model(partitioned, opts, results,
                            progress=lambda done, total: (steps.append(done), step("quantize", done, total)))
    if not steps:   # no fixed-point frame (a quantization-parameters file)
        step("quantize", 1, 1)
    return qmodel


def emulate(model, inputs: Mapping[str, "object"], *, kernels="fast", mode: str = "float", options=None,
            calib=None, **kwargs) -> list:
    """Runs a model in the emulator; inputs by parameter name; returns the outputs as a list of arrays.

    * an ``IRModule`` with ``mode="float"`` (the default): the float32 emulator (``kernels``: ``"fast"``
      or ``"reference"``, see ``tidlx.emulator.run``);
    * a ``QuantizedModel`` (from ``tidlx.quantize``): TIDL subgraphs in fixed point, the host part in
      float with ``kernels``, data convert at the boundaries;
    * an ``IRModule`` with ``mode="fixed"``: ``tidlx.quantize(model, options, calib)`` then as above.
    """
    from .backends.tidl.quantize import QuantizedModel

    if mode not in ("float", "fixed"):
        raise TidlxError(f"tidlx.emulate: mode must be 'float' or 'fixed', got {mode!r}")
    if isinstance(model, QuantizedModel):
        if kwargs or options is not None or calib is not None:
            raise TidlxError("tidlx.emulate: a QuantizedModel is already quantized; options= and calib= apply to "
                             "an IRModule with mode='fixed'")
        if not isinstance(inputs, Mapping):
            raise TypeError(f"tidlx.emulate: inputs must be a mapping of input name to array, got "
                            f"{type(inputs).__name__}")
        return model.run(dict(inputs), host_kernels=kernels)
    if mode == "fixed":
        return emulate(quantize(model, options, calib), inputs, kernels=kernels)
    if options is not None or calib is not None:
        raise TidlxError("tidlx.emulate: options= and calib= apply to mode='fixed'")
    return _api.emulate(model, inputs, kernels=kernels, **kwargs)


def compare(model, inputs=None, options=None, calib=None, *, frames: Optional[int] = None, isolated: bool = False,
            kernels: str = "reference", progress=None, mean=None, scale=None, qdq_model=None):
    """Float vs fixed point per model output and per TIDL layer: SQNR in dB, max abs error, % of
    values saturated; ``result.layers`` worst first (lowest SQNR), ``result.headline()``,
    ``result.to_dict()``. The figures and their definitions: ``tidlx.backends.tidl.compare``.

    ``model``: an ``IRModule`` (partitioned with ``options`` unless it holds TIDL subgraphs already,
    calibrated on ``calib`` as ``tidlx.quantize`` does, then quantized) or a ``QuantizedModel``.
    ``inputs``: the frames to compare on (a path to an ``.npz``, or arrays by input name, frames on
    the batch axis); None: the first ``frames`` (default 1) calibration frames, which the ranges were
    calibrated on (a ``QuantizedModel`` without inputs: one seeded random frame). Each layer's error
    is accumulated (it ran on fixed-point inputs); ``isolated=True`` adds each layer's own error.
    ``progress(stage, done, total)``: after each calibration frame (``"calibration"``), during
    quantization (``"quantize"``, as ``tidlx.quantize``) and after each compared frame (``"compare"``). ``mean``/``scale``: a ``calib`` folder's per-channel preprocessing.
    ``qdq_model``: the path of a prequantized (QDQ) ONNX model the module was loaded from
    (``prequantized_model=1``): each output is also set against onnxruntime's run of that file (the
    ``qdq_*`` figures of ``result.outputs``; docs/prequantized.md).

    >>> result = tidlx.compare(mod, options={"tensor_bits": 16}, calib={"img": frames})  # doctest: +SKIP
    >>> result.outputs[0].sqnr_db, result.layers[0].layer                               # doctest: +SKIP
    (54.4, 'tidl_0_i0')
    """
    from .backends.tidl.compare import compare as _compare

    reference = None
    if qdq_model is not None:
        from .backends.tidl.qdq_reference import QdqReference

        reference = QdqReference(qdq_model)
    return _compare(model, inputs, options, calib, frames=frames, isolated=isolated, kernels=kernels,
                    progress=progress, mean=mean, scale=scale, qdq_reference=reference)


__all__ = ["compare", "quantize", "emulate"]
