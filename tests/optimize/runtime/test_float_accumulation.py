"""float32 sums ONNX Runtime adds element by element are accumulated in double, as close to the
exact sum as ATen's cascade (``cumsum``: ATen's own double accumulation)."""

from __future__ import annotations

import onnx_ir
import pytest
import torch

from helpers import assert_matches_eager
from torch_onnx_fx.optimize.runtime.float_accumulation import LONGEST_FLOAT_SUM


class _Apply(torch.nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, x, y=None):
        return self.function(x) if y is None else self.function(x, y)


def _relative_to_exact(program, function, *args) -> float:
    """The largest error of the exported model against the float64 result, over its magnitude."""
    exact = function(*(a.double() for a in args))
    (got,) = program(*args)
    return float((got.double() - exact).abs().max() / exact.abs().max())


def _wide_ops(program) -> list[str]:
    """The nodes that read a float32 → float64 Cast: the ones computed in double."""
    return [
        reader.op_type
        for node in program.model.graph
        if node.op_type == "Cast" and node.attributes.get_int("to") == onnx_ir.DataType.DOUBLE
        for reader, _ in node.outputs[0].uses()
    ]


@pytest.mark.parametrize(
    "name, function, shape",
    [
        ("sum", lambda x: x.sum(), (1_000_000,)),
        ("mean_over_image", lambda x: x.mean(dim=(2, 3)), (1, 3, 512, 512)),
        ("cumsum", lambda x: x.cumsum(0), (100_000,)),
        ("cdist", lambda a, b: torch.cdist(a, b), None),
    ],
)
def test_long_sums_match_eager_tightly(name, function, shape) -> None:
    torch.manual_seed(0)
    # Same-signed values: every rounding of a running sum drifts the same way. Before, these were
    # 4.5e-6 (sum), 6e-7 (mean), 5.3e-6 (cumsum) and 1.2e-6 (cdist over 4,096 features) off.
    args = (torch.rand(4, 4096), torch.rand(3, 4096)) if shape is None else (torch.rand(*shape),)
    model = _Apply(function).eval()
    # Eager's own cdist is 1.4e-6 off here: against eager, float32's usual tolerance.
    program = assert_matches_eager(model, args, rtol=2e-7 if shape else 2e-6, atol=0)
    assert _relative_to_exact(program, function, *args) < 1.2e-7
    assert _wide_ops(program), [node.op_type for node in program.model.graph]


def test_norm_sized_sums_keep_float_kernels() -> None:
    # A layer norm's mean over a hidden size (here the largest kept, 16,384) stays a float32
    # ReduceMean: its vectorized kernel is within a few ulps there, and ONNX Runtime's norm
    # fusions read it.
    model = torch.nn.LayerNorm(LONGEST_FLOAT_SUM).eval()
    program = assert_matches_eager(model, (torch.randn(2, 3, LONGEST_FLOAT_SUM),), rtol=1e-5, atol=1e-5)
    assert not _wide_ops(program)
    summed = _Apply(lambda x: x.sum(-1)).eval()
    program = assert_matches_eager(summed, (torch.rand(4, LONGEST_FLOAT_SUM),), rtol=1e-6, atol=0)
    assert not _wide_ops(program)


def test_length_known_only_at_run_time_stays_float() -> None:
    # Whether a dynamic length is long is not known when the graph is made.
    model = _Apply(lambda x: x.sum(-1)).eval()
    length = torch.export.Dim("length")
    program = assert_matches_eager(model, (torch.rand(2, 40_000),), rtol=1e-5, atol=0, dynamic_shapes=({1: length},))
    assert not _wide_ops(program)
