"""``torch_onnx_fx.verification``: comparing an exported program with its model.

The public import path of :mod:`torch_onnx_fx.diagnostics.verification`, as torch.onnx has
``torch.onnx.verification``.
"""

from torch_onnx_fx.diagnostics.verification import (
    VerificationInfo,
    check_output_count,
    first_divergence,
    tolerance_for,
    verify,
    verify_onnx_program,
)

__all__ = ["VerificationInfo", "verify_onnx_program", "verify", "first_divergence", "tolerance_for", "check_output_count"]
