"""float64 transposed convolutions and average poolings run in ONNX Runtime, in float64.

ONNX Runtime registers ConvTranspose, AveragePool and float Resize for float32 only: without the rewrite these
models export but the runtime refuses them; narrowed to float32 they would lose precision.
"""

from __future__ import annotations

import onnx_ir as ir
import pytest
import torch

from helpers import assert_matches_eager

pytest.importorskip("onnxruntime", reason="the rewrites adapt to ONNX Runtime's kernel registry")

F = torch.nn.functional
DOUBLE = torch.float64


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=DOUBLE)


CASES = {
    "conv_transpose2d_dilated_bias": (
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, dilation=2),
        lambda: (_randn(2, 4, 5, 6), _randn(4, 3, 3, 2), _randn(3)),
    ),
    "conv_transpose2d_groups": (
        lambda x, w: F.conv_transpose2d(x, w, stride=(3, 1), padding=(2, 0), groups=2),
        lambda: (_randn(1, 4, 5, 5), _randn(4, 3, 3, 3)),
    ),
    # Pads larger than the kernel's reach: the equivalent convolution crops instead of padding.
    "conv_transpose1d_cropping": (
        lambda x, w: F.conv_transpose1d(x, w, stride=3, padding=4, output_padding=2),
        lambda: (_randn(2, 3, 7), _randn(3, 2, 5)),
    ),
    "conv_transpose3d": (
        lambda x, w: F.conv_transpose3d(x, w, stride=2),
        lambda: (_randn(1, 2, 3, 4, 3), _randn(2, 2, 2, 3, 2)),
    ),
    "avg_pool1d_ceil_uncounted_pads": (
        lambda x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
        lambda: (_randn(1, 2, 8),),
    ),
    # A last window that ceil_mode lets run past the padding: counted pads, clipped window.
    "avg_pool2d_ceil_counted_pads": (
        lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=True),
        lambda: (_randn(1, 1, 6, 6),),
    ),
    "avg_pool2d_rectangular": (
        lambda x: F.avg_pool2d(x, (3, 2), (2, 1), (1, 1), ceil_mode=True, count_include_pad=False),
        lambda: (_randn(2, 2, 9, 8),),
    ),
    "avg_pool3d": (lambda x: F.avg_pool3d(x, 2, 2, 1, ceil_mode=True), lambda: (_randn(1, 2, 5, 6, 7),)),
    # torch writes it as an average pooling of the squares over a channel window.
    "local_response_norm": (lambda x: F.local_response_norm(x, 3, alpha=0.1, k=2.0), lambda: (_randn(2, 6, 3, 4, 3),)),
    "interpolate_nearest_scale": (lambda x: F.interpolate(x, scale_factor=1.7, mode="nearest"), lambda: (_randn(1, 2, 4, 5),)),
    "interpolate_nearest_size_1d": (lambda x: F.interpolate(x, size=9, mode="nearest"), lambda: (_randn(2, 2, 4),)),
    "interpolate_bilinear_size": (lambda x: F.interpolate(x, size=(7, 5), mode="bilinear"), lambda: (_randn(1, 2, 4, 4),)),
    "interpolate_bilinear_align_corners": (
        lambda x: F.interpolate(x, size=(7, 3), mode="bilinear", align_corners=True), lambda: (_randn(1, 2, 4, 4),),
    ),
    "interpolate_bilinear_downscale": (lambda x: F.interpolate(x, scale_factor=0.5, mode="bilinear"), lambda: (_randn(1, 2, 8, 6),)),
    "interpolate_trilinear": (lambda x: F.interpolate(x, size=(3, 5, 4), mode="trilinear"), lambda: (_randn(1, 2, 2, 3, 4),)),
    "interpolate_bicubic_scale": (lambda x: F.interpolate(x, scale_factor=2.5, mode="bicubic"), lambda: (_randn(1, 2, 4, 4),)),
    "interpolate_bicubic_align_corners": (
        lambda x: F.interpolate(x, size=(9, 3), mode="bicubic", align_corners=True), lambda: (_randn(1, 2, 4, 6),),
    ),
    "interpolate_nearest_3d": (
        lambda x: F.interpolate(x, scale_factor=(2, 0.5, 1.5), mode="nearest"), lambda: (_randn(1, 2, 3, 4, 5),),
    ),
}


def ops_of(program) -> set[str]:
    return {node.op_type for node in program.model.graph}


@pytest.mark.parametrize("name", sorted(CASES))
def test_float64_windows_keep_float64_precision(name):
    fn, make_args = CASES[name]
    # Large magnitudes: float32 arithmetic would be off by ~1e-7 of them, far past the tolerance.
    args = tuple(a * 1e4 + 1e5 if i == 0 else a for i, a in enumerate(make_args()))
    program = assert_matches_eager(fn, args, rtol=1e-12, atol=1e-9)
    assert "Resize" not in ops_of(program) or name.startswith("interpolate_nearest")
    assert not ops_of(program) & {"ConvTranspose", "AveragePool"}
    # Only the integer positions of nearest-neighbour resizing are cast; no float64 value is.
    assert all(n.outputs[0].dtype != ir.DataType.FLOAT for n in program.model.graph if n.op_type == "Cast")


def test_float64_transposed_convolution_pooling_and_resizing_with_dynamic_sizes():
    class Upsample(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up = torch.nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1).double()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            pooled = F.avg_pool2d(self.up(x), 3, 2, 1, count_include_pad=False)
            taller = F.interpolate(pooled, size=(pooled.shape[2] * 2 + 1, 5), mode="nearest")
            return F.interpolate(taller, scale_factor=2.0, mode="bicubic")

    dim = torch.export.Dim
    assert_matches_eager(
        Upsample(), (_randn(2, 3, 5, 6),),
        dynamic_shapes={"x": {0: dim("batch"), 2: dim("height", min=2), 3: dim("width", min=2)}},
        more_inputs=[((_randn(1, 3, 9, 4),), {})], rtol=1e-12, atol=1e-12,
    )


def test_float64_resizing_by_an_inexact_scale_uses_atens_own_weights():
    # The graph would hold the scale 1.7 as float32 while ATen computes with the double 1.7, so
    # this pass leaves such a Resize alone (ONNX Runtime then refused to load it). The
    # translation in ops/resampling.py now asks ATen for the weights at export, computed with
    # the double scale: the values match and no Resize is left.
    class Upscale(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.interpolate(x, scale_factor=1.7, mode="bilinear")

    program = assert_matches_eager(Upscale(), (_randn(1, 2, 4, 5),), rtol=1e-13, atol=1e-13)
    assert "Resize" not in ops_of(program)
