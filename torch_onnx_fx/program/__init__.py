"""Program: what an export returns, and how it is named, fed, saved and given new weights.

The fifth stage of an export: :class:`ONNXProgram` (``onnx_program``) wraps the optimized model
with the graph interface ``naming`` gave it (input and output names, output dims); it checks call
inputs against the graph (``feeds``), runs ONNX Runtime, replaces weights by state-dict name or
from safetensors files (``weights``, ``safetensors_files``) and saves atomically (``saving``).
``torch_onnx_fx.program.ONNXProgram`` is also the import path users had before this package
had stages.
"""

from torch_onnx_fx.program.onnx_program import ONNXProgram

__all__ = ["ONNXProgram"]
