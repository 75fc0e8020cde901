"""Process-wide state: whether an export is under way, the package version and its folder."""

from __future__ import annotations

import functools
import os

IN_ONNX_EXPORT = False

# The package's root folder: frames of its own code are not the user's line in an error.
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


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
