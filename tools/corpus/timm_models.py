"""The generated timm corpus: the first variant of every model family of ``timm.list_models()``.

A family is a timm module (``timm.list_modules()``: resnet, vision_transformer, convnext, ...);
its first variant is the first name ``timm.list_models(module=...)`` gives. Each is built by
``timm.create_model`` with random weights (no download), BatchNorm statistics calibrated on random
images (``tools.corpus.models.calibrate``), and called on random images of its published input size
(``pretrained_cfg["input_size"]``), batch dynamic (example batch 2, second input set batch 3).
Outputs are compared at rtol 1e-3 / atol 1e-5, or with eager in float64 where that fails, as the
torchvision corpus.

Cases are named ``timm-<model>``; the sweep is ``python tools/sweeps/modelsweep.py --corpus timm`` in
the torchvision environment (timm needs torchvision; see docs/coverage_timm.md).
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from tools.corpus.models import ModelCase, _randn, calibrate

__all__ = ["cases", "first_variants"]

RTOL, ATOL = 1e-3, 1e-5


@functools.lru_cache(maxsize=1)
def first_variants() -> dict[str, str]:
    """model name -> its family (timm module), one per family, in module order."""
    import timm

    out: dict[str, str] = {}
    for module in timm.list_modules():
        names = timm.list_models(module=module)
        if names:
            out[names[0]] = module
    return out


def _case(name: str, family: str) -> ModelCase:
    def input_shape() -> tuple[int, ...]:
        import timm

        return tuple(timm.get_pretrained_cfg(name).to_dict().get("input_size", (3, 224, 224)))

    def build() -> tuple[Any, tuple, dict, Any]:
        import timm

        torch.manual_seed(0)
        model = timm.create_model(name, pretrained=False)
        shape = input_shape()
        calibrate(model, lambda: (torch.randn(4, *shape),))
        return model, (_randn(2, *shape),), {}, ({0: "batch"},)

    return ModelCase(
        f"timm-{name}", build, family, lambda: ((_randn(3, *input_shape()),), {}), rtol=RTOL, atol=ATOL, ci=False,
        float64_reference=True,
    )


def cases() -> list[ModelCase]:
    return [_case(name, family) for name, family in first_variants().items()]

