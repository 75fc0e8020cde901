"""torch_onnx_fx's own translations, registered ahead of torchlib.

Grouped by family; importing this package registers them all. Each translation is a plain
function (or ONNX Script function) taking the FX node's arguments with tensors as ``ir.Value``.
:func:`builtin_table` is the stage's one entry: every built-in translation, ours then torchlib's,
which ``export`` hands to the :class:`~torch_onnx_fx.registry.TranslationTable`.
"""

from __future__ import annotations

import functools
from typing import Any

from torch_onnx_fx.registry import TORCHLIB, Deferred, Translation, registered_translations, torchlib_limit
from torch_onnx_fx.ops.deferred_torchlib import torchlib_function, torchlib_index
from torch_onnx_fx.ops import (  # noqa: F401
    exactness,  # first: its refusals come before any translation of the same operators
    integer_windows,  # before pooling's divisor translation, which computes in floating point
    activation,
    affine_quantized,
    arange,
    arithmetic,
    complex,
    control_flow,
    core,
    diagonal,
    double_precision,
    embedding_bag,
    embedding_norm,
    factories,
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
    recurrent,
    resampling,
    sampling,
    scaled_products,
    sorting,
    special,
    stable,
    strided,
    symbolic,
    unique,
    view_scatter,
    vision,
    # last: general translations of everyday operators, which every more particular translation
    # above (an exact integer form, a shape it can skip) comes before
    elementwise,
    layers,
    layout,
)

__all__ = ["builtin_table"]


@functools.lru_cache(maxsize=1)
def builtin_table() -> dict[Any, tuple[Translation, ...]]:
    """torch_onnx_fx ops first, then torchlib's (deferred: loaded by the first node that takes
    one): built once per process."""
    table: dict[Any, list[Translation]] = {}
    for key, translations in registered_translations().items():
        table.setdefault(key, []).extend(translations)
    for name, (real, complex_) in torchlib_index().items():
        entries = table.setdefault(name, [])
        limit = torchlib_limit(name)
        for count, is_complex in ((real, False), (complex_, True)):
            entries.extend(
                Translation(
                    Deferred(f"{name} (torchlib)", torchlib_function(name, i, is_complex)), TORCHLIB,
                    complex=is_complex, supports=limit,
                )
                for i in range(count)
            )
    return {k: tuple(v) for k, v in table.items()}
