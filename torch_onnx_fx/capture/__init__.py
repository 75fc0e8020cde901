"""Capture: the user's model as a ``torch.export.ExportedProgram``.

The first stage of an export. :func:`capture` tries torch.export's strategies in order
(``strategies``), with the keyword arguments a ``**kwargs`` forward collects spelled out
(``keywords``), known library functions that branch on data-dependent sizes replaced while tracing
(``library_patches``, ``keypoint_heatmaps``), NumPy's sqrt of a symbolic size answered
(``symbolic_math``), and eager-mode quantized modules swapped for float
modules replaying their arithmetic (``eager_quantization``, ``quantized_functions``,
``quantized_grids``). With ``export_modules_as_functions``, each distinct repeated block is traced
once and its trace copied for the instances provably equal to it (``repeated_blocks``,
``block_guards``, ``block_ops``, then ``block_replay`` on the captured program). Before it,
:func:`prepare` makes the inputs readable to torch.export: library containers among them (or in
the model's outputs) registered as pytrees (``cache_containers``), and the user's dynamic shapes
(named dims, legacy ``dynamic_axes``) turned into what torch.export takes (``dynamic_shapes``).
"""

from typing import Any, Mapping, Sequence

from torch_onnx_fx.capture.cache_containers import register_caches
from torch_onnx_fx.capture.dynamic_shapes import DimNames, prepare_dynamic_shapes
from torch_onnx_fx.capture.strategies import capture

__all__ = ["capture", "prepare", "prepare_dynamic_shapes"]


def prepare(model: Any, args: Sequence[Any], kwargs: Mapping[str, Any], dynamic_shapes: Any) -> tuple[Any, DimNames]:
    """Containers registered, then :func:`prepare_dynamic_shapes`' result (which reads the
    inputs' structure through them)."""
    register_caches(model, args, kwargs)
    return prepare_dynamic_shapes(model, args, kwargs, dynamic_shapes)
