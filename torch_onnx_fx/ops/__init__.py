"""torch_onnx_fx's own translations, registered ahead of torchlib.

Grouped by family; importing this package registers them all. Each translation is a plain
function (or ONNX Script function) taking the FX node's arguments with tensors as ``ir.Value``.
:func:`builtin_table` is the stage's one entry: every built-in translation, ours then torchlib's,
which ``export`` hands to the :class:`~torch_onnx_fx.registry.TranslationTable`.
"""

from __future__ import annotations

import functools
from typing import Any

from torch_onnx_fx.registry import TORCHLIB, Translation, registered_translations, torchlib_limit
from torch_onnx_fx.ops import (  # noqa: F401
    exactness,  # first: its refusals come before any translation of the same operators
    integer_windows,  # before pooling's divisor translation, which computes in floating point
    activation,
    affine_quantized,
    arithmetic,
    complex,
    control_flow,
    core,
    diagonal,
    double_precision,
    embedding_bag,
    grid_sample,
    histogram,
    indexing,
    linalg,
    losses,
    nn,
    nonfinite,
    normalization,
    onnx_ops,
    ort_attention,
    packed,
    padding,
    pooling,
    prims,
    quantized,
    sorting,
    special,
    stable,
    strided,
    symbolic,
    view_scatter,
    vision,
)

__all__ = ["builtin_table"]


@functools.lru_cache(maxsize=1)
def builtin_table() -> dict[Any, tuple[Translation, ...]]:
    """torch_onnx_fx ops first, then torchlib: built once per process."""
    from onnxscript.function_libs.torch_lib import registration
    import onnxscript.function_libs.torch_lib.ops  # noqa: F401 - fills the registry

    table: dict[Any, list[Translation]] = {}
    for key, translations in registered_translations().items():
        table.setdefault(key, []).extend(translations)
    for name, overloaded in registration.default_registry.items():
        entries = table.setdefault(name, [])
        limit = torchlib_limit(name)
        entries.extend(Translation(f, TORCHLIB, supports=limit) for f in overloaded.overloads)
        entries.extend(Translation(f, TORCHLIB, complex=True, supports=limit) for f in overloaded.complex)
    return {k: tuple(v) for k, v in table.items()}
