"""Which frames of a stack are the model's code: the lines a capture failure can point the user at.

torch.export fails deep inside its tracer; what the user can act on is the innermost line of model
code that led there. Most models are a library's (transformers, diffusers, timm), so that line is
often in an installed package; it is shown with the innermost line of the user's own code.
"""

from __future__ import annotations

import os
import traceback
from typing import Iterable

import torch

from torch_onnx_fx._state import PACKAGE_DIR

__all__ = ["is_model_code", "describe_frames", "below_exporter"]

_TORCH_DIR = os.path.dirname(torch.__file__)
_STDLIB_DIR = os.path.dirname(os.__file__)

# Installed packages a failure passes through between the model's line and torch: a frame of
# theirs is never the line to fix (sympy evaluates torch's guards, numpy raises for a symbolic
# size it was handed). Model libraries (transformers, diffusers, timm...) are not among them.
_PLUMBING = frozenset({"numpy", "sympy", "onnx", "onnxscript", "onnx_ir", "onnxruntime", "typing_extensions", "_pytest", "pluggy"})


def _installed_package(filename: str) -> str | None:
    """The top-level package an installed file belongs to, None for code outside site-packages."""
    for marker in (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}"):
        if marker in filename:
            return filename.split(marker, 1)[1].split(os.sep, 1)[0]
    return None


def is_model_code(filename: str) -> bool:
    return (
        not filename.startswith((_TORCH_DIR, _STDLIB_DIR + os.sep, PACKAGE_DIR))
        and _installed_package(filename) not in _PLUMBING
        and "<frozen" not in filename
        # code torch generates and evals (FX's forward is "<eval_with_key>", others "<string>")
        and not (filename.startswith("<") and filename != "<stdin>" and not filename.startswith("<ipython"))
    )


def describe_frames(frames: Iterable[traceback.FrameSummary]) -> str | None:
    """``file:line: code`` of the innermost frame of model code (outermost first in ``frames``),
    followed by the user's own innermost line when that one is in an installed library; None
    when no frame is model code."""
    kept = [f for f in frames if is_model_code(f.filename)]
    if not kept:
        return None

    def where(f: traceback.FrameSummary) -> str:
        return f"{f.filename}:{f.lineno}: {(f.line or '').strip()}"

    text = where(kept[-1])
    own = [f for f in kept if _installed_package(f.filename) is None]
    if own and own[-1] is not kept[-1]:
        text += f"\n    called from {where(own[-1])}"
    return text


def below_exporter(frames: list[traceback.FrameSummary]) -> list[traceback.FrameSummary]:
    """The frames a capture ran (the model's among them): those after the exporter's own last
    one in a whole-process stack, without the user's script that called export."""
    ours = [i for i, f in enumerate(frames) if f.filename.startswith(PACKAGE_DIR)]
    return frames[ours[-1] + 1:] if ours else frames
