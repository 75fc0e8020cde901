"""Diagnostics: what an export tells about itself, beside the model.

The last stage: :func:`session` wraps one export, recording what each stage did for the
``report``, ``profile`` and ``dump_exported_program`` artifacts and running ``verify``
(``session``); ``verification`` compares an ``ONNXProgram`` with the model it came from, output
by output and, on request, node by node (public as ``torch_onnx_fx.verification``).
"""

from torch_onnx_fx.diagnostics.session import session

__all__ = ["session"]
