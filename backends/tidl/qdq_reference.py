"""onnxruntime's run of a prequantized (QDQ) ONNX model, the reference ``compare`` sets TIDL's fixed
point against when the model is compiled with ``advanced_options:prequantized_model=1``
(docs/prequantized.md).

    ref = QdqReference("model_qdq.onnx")
    ref.run({"x": frame})          # the QDQ model's outputs, in the graph's output order
    ref.steps                      # per output: the scale of the DequantizeLinear making it, or None

The QDQ model's own quantization step of an output is the scale of the DequantizeLinear that makes it
(a per-tensor scale); an output no DequantizeLinear makes has none, and the share of elements within
one step is then not reported.
"""

from __future__ import annotations

from typing import List, Mapping, Optional, Sequence

import numpy as np

from ...ir.errors import TidlxError


class QdqReferenceError(TidlxError):
    """The QDQ model cannot be read or run by onnxruntime, or its outputs do not match the model's."""


class QdqReference:
    """An onnxruntime session on the QDQ model file at ``path`` (CPU, onnxruntime's default graph
    optimizations, as a user runs it)."""

    def __init__(self, path: str):
        import onnx
        import onnxruntime as ort
        from onnx import numpy_helper

        self.path = str(path)
        try:
            model = onnx.load(self.path)
            self._session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnx and onnxruntime raise their own types
            raise QdqReferenceError(f"{self.path}: onnxruntime cannot run the QDQ model: {exc}") from exc
        inits = {t.name: t for t in model.graph.initializer}
        made_by = {out: node for node in model.graph.node for out in node.output}
        self.output_names: List[str] = [o.name for o in model.graph.output]
        self.input_names: List[str] = [i.name for i in self._session.get_inputs()]
        self.steps: List[Optional[float]] = []
        for name in self.output_names:
            node = made_by.get(name)
            step = None
            if node is not None and node.op_type == "DequantizeLinear" and len(node.input) > 1 \
                    and node.input[1] in inits:
                scale = numpy_helper.to_array(inits[node.input[1]])
                if scale.size == 1 and float(scale.reshape(())) > 0:
                    step = float(scale.reshape(()))
            self.steps.append(step)

    def run(self, frame: Mapping[str, np.ndarray]) -> List[np.ndarray]:
        missing = [n for n in self.input_names if n not in frame]
        if missing:
            raise QdqReferenceError(f"{self.path}: the compared frame has no input {missing[0]!r} for the QDQ model "
                                    f"(its inputs: {', '.join(self.input_names)})")
        try:
            return [np.asarray(v) for v in self._session.run(None, {n: frame[n] for n in self.input_names})]
        except Exception as exc:
            raise QdqReferenceError(f"{self.path}: onnxruntime's run of the QDQ model failed: {exc}") from exc

    def order_for(self, names: Sequence[str]) -> List[int]:
        """For each of the compared model's outputs (``names``), the index of the QDQ model's output of that
        name, or by position when the names differ; an error when the counts differ."""
        if len(names) != len(self.output_names):
            raise QdqReferenceError(f"{self.path}: the QDQ model has {len(self.output_names)} outputs, the compiled "
                                    f"model {len(names)}")
        if sorted(names) == sorted(self.output_names):
            return [self.output_names.index(n) for n in names]
        return list(range(len(names)))


def within_step(reference: np.ndarray, value: np.ndarray, step: float) -> int:
    """How many elements of ``value`` lie within one QDQ step of ``reference`` (a float32 ulp's slack)."""
    diff = np.abs(np.asarray(value, np.float64) - np.asarray(reference, np.float64))
    return int(np.count_nonzero(diff <= step * (1 + 1e-6)))


__all__ = ["QdqReference", "QdqReferenceError", "within_step"]
