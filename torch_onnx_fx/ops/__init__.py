"""torch_onnx_fx's own translations, registered ahead of torchlib.

Grouped by family; importing this package registers them all. Each translation is a plain
function (or ONNX Script function) taking the FX node's arguments with tensors as ``ir.Value``.
"""

from torch_onnx_fx.ops import (  # noqa: F401
    exactness,  # first: its refusals come before any translation of the same operators
    activation,
    arithmetic,
    complex_math,
    complex_tensors,
    control_flow,
    core,
    grid_sample,
    histogram,
    indexing,
    linalg,
    losses,
    nn,
    normalization,
    onnx_ops,
    packed,
    padding,
    pooling,
    prims,
    sorting,
    special,
    spectral,
    symbolic,
    view_scatter,
    vision,
)

__all__: list[str] = []
