"""The generated torchvision corpus: every model of ``torchvision.models.list_models()``.

Each model is built by its builder with random weights (no download), its BatchNorm statistics
calibrated on random inputs (``tools.corpus.models.calibrate``), and called on random inputs of the size
it is published for, batch dynamic (example batch 2, second input set batch 3): classifiers on
224 x 224 images (299 for Inception v3), segmentation models on 224 x 224, video models on clips
(8 x 112 x 112, or 16 x 224 x 224 where the architecture fixes it), RAFT on two 128 x 128 images.
Quantized models are built with ``quantize=True`` (torchvision quantizes them with its own
calibration on one random batch), as a user exporting ``quantized_resnet18`` would, and called
on images in that batch's range, [0, 1).

Detection models take a list of images and return a list of dicts; they are checked by
``tools/sweeps/detection_check.py`` (as sets of detections, with and without detections) and listed here
only by name, so that every name of ``list_models()`` is accounted for.

Outputs are compared at rtol 1e-3 / atol 1e-5, the tolerance of torchvision's own ONNX tests, or,
where that fails, with eager in float64: as close to it as eager's float32 outputs pass
(atol 1e-4 for RAFT's iterated flows, see ``_case``).
Cases are named ``tv-<builder>``; the sweep is ``python tools/sweeps/modelsweep.py --corpus torchvision``
run in the torchvision environment (torch 2.14.1, see docs/coverage_torchvision.md).
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from tools.corpus.models import ModelCase, _randn, calibrate

__all__ = ["cases", "detection_models"]

RTOL, ATOL = 1e-3, 1e-5

# Architectures whose positional embeddings or final pooling fix the clip size.
_FULL_CLIP = {"s3d", "mvit_v1_b", "mvit_v2_s"}
_KIND_OF_MODULE = {
    "torchvision.models.quantization": "quantized",
    "torchvision.models.detection": "detection",
    "torchvision.models.segmentation": "segmentation",
    "torchvision.models.video": "video",
    "torchvision.models.optical_flow": "optical-flow",
}


@functools.lru_cache(maxsize=1)
def _kinds() -> dict[str, str]:
    """builder name -> kind (classification unless one of the task modules lists it)."""
    import importlib

    import torchvision.models as models

    kinds = dict.fromkeys(models.list_models(), "classification")
    for module, kind in _KIND_OF_MODULE.items():
        for name in models.list_models(module=importlib.import_module(module)):
            kinds[name] = kind
    return kinds


def _input_shape(name: str, kind: str) -> tuple[int, ...]:
    """One example's shape, batch excluded."""
    if kind == "video":
        return (3, 16, 224, 224) if name in _FULL_CLIP else (3, 8, 112, 112)
    if kind == "optical-flow":
        return (3, 128, 128)
    side = 299 if "inception_v3" in name else 224
    return (3, side, side)


def _case(name: str, kind: str) -> ModelCase:
    shape = _input_shape(name, kind)
    arity = 2 if kind == "optical-flow" else 1

    def inputs(batch: int) -> tuple[torch.Tensor, ...]:
        if kind == "quantized":
            # Images in [0, 1), the range torchvision calibrates its quantized models on: beyond
            # it fbgemm's 16-bit pair sums saturate (what its reduced 7-bit activation range is
            # for), which a graph computing the exact sums does not reproduce.
            return (torch.rand(batch, *shape, generator=torch.Generator().manual_seed(batch)),)
        # Distinct tensors for RAFT's two frames: the same image twice has zero flow everywhere.
        return tuple(_randn(batch + i * 7, *shape)[:batch] for i in range(arity))

    def build() -> tuple[Any, tuple, dict, Any]:
        import torchvision.models as models

        torch.manual_seed(0)
        if kind == "quantized":
            model = models.get_model(name, weights=None, quantize=True).eval()
        else:
            # Segmentation builders download a backbone unless told not to.
            extra = {"weights_backbone": None} if kind == "segmentation" else {}
            model = models.get_model(name, weights=None, **extra)
            calibrate(model, lambda: tuple(torch.randn(2 if kind == "video" else 4, *shape) for _ in range(arity)))
        return model, inputs(2), {}, tuple({0: "batch"} for _ in range(arity))

    # RAFT refines its flow 12 times, each output adding to the last, flows of up to ~20 pixels:
    # float32 rounding grows to ~2e-6 of the magnitude by the last (3.7e-5 absolute, measured
    # for our graph), which an absolute 1e-5 cannot hold.
    atol = 1e-4 if kind == "optical-flow" else ATOL
    return ModelCase(f"tv-{name}", build, kind, lambda: (inputs(3), {}), rtol=RTOL, atol=atol, ci=False, float64_reference=True)


def detection_models() -> list[str]:
    """The builders checked by ``tools/sweeps/detection_check.py`` instead of this sweep."""
    return [name for name, kind in _kinds().items() if kind == "detection"]


def cases() -> list[ModelCase]:
    """Every model of ``list_models()`` but the detection models, in list order."""
    return [_case(name, kind) for name, kind in _kinds().items() if kind != "detection"]


