"""Optimize: the translated ONNX model made smaller, faster and runnable where it must run.

The fourth stage of an export: :func:`optimize_model` runs the whole recipe (``recipe``) —
onnx-ir and onnxscript passes (``optimizer`` and one module per pass of our own), the weight
passes that keep every weight replaceable (``weights/``), fused operators (``fusion``), older
opsets (``downgrade``) and ONNX Runtime's missing kernels (``runtime/``).
"""

from torch_onnx_fx.optimize.recipe import optimize_model

__all__ = ["optimize_model"]
