"""Process-wide state: whether an export is under way, and the package version."""

from __future__ import annotations

import functools

IN_ONNX_EXPORT = False


def is_in_onnx_export() -> bool:
    """True while ``torch_onnx_fx.export`` runs (models may branch on it, as on torch.onnx's)."""
    return IN_ONNX_EXPORT


@functools.lru_cache(maxsize=1)
def version() -> str:
    from importlib import metadata

    try:
        return metadata.version("torch_onnx_fx")
    except metadata.PackageNotFoundError:
        return "0+unknown"
