"""The built-in models a study may name (``builtin: NAME`` with ``args``), built in memory as ONNX."""

from __future__ import annotations

#: name -> the custom ops the model's import needs (``MODULE:FUNC``, as ``--custom-ops`` takes them).
BUILTIN_MODELS = {
    "bevdet_img_stage": (),
    "bevdet_img_stage_tiny": (),
    "bevdet_ti_export": (),
    "bevdet_with_bev_pool": ("tidlx.models:register_bev_pool",),
    "bn_between_gemms": (),
}


def build_model(name: str, args) -> bytes:
    """The serialized ONNX model of built-in ``name`` called with ``args`` (the same arguments give the
    same bytes: the builders are seeded)."""
    from .. import models
    from ..ir import TidlxError
    from .study import StudyError

    try:
        proto = getattr(models, name)(**dict(args))
    except TypeError as exc:   # an argument the builder does not take
        raise StudyError(f"{name}: {exc}") from None
    except TidlxError as exc:
        raise StudyError(str(exc)) from None
    return proto.SerializeToString(deterministic=True)
