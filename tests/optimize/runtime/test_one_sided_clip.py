"""optimize/runtime/one_sided_clip.py: a clamp with one bound keeps infinities.

ONNX Runtime fills a Clip's missing bound with the dtype's largest finite value, so clamp_min(inf)
was 3.4e38 and F.normalize of a row holding inf returned 3e-39 for 0 (eager 0) and inf for NaN.
Every float case here failed before.
"""

from __future__ import annotations

import onnx_ir as ir
import pytest
import torch
import torch.nn.functional as F

import torch_onnx_fx
from helpers import assert_matches_eager

INF, NAN = float("inf"), float("nan")
X = torch.tensor([[INF, -INF, 0.0, 2.0], [1.0, NAN, -5.0, 3.0], [INF, 1.0, 1.0, 0.0]])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_one_sided_clamps_keep_infinities(dtype):
    def model(x):
        return x.clamp_min(0.5), x.clamp(max=1.0), torch.clamp(x, min=-1.0), F.relu6(x), x.clamp(-1.0, 1.0)

    assert_matches_eager(model, (X.to(dtype),), rtol=0, atol=0)


def test_normalize_of_a_row_with_an_infinity():
    assert_matches_eager(lambda x: F.normalize(x, dim=1), (X,), rtol=1e-6, atol=0)


def test_integer_clips_are_left_as_clip():
    onnx_program = torch_onnx_fx.export(lambda x: x.clamp_min(2), (torch.arange(6),), verbose=False)
    assert [n.op_type for n in onnx_program.model.graph] == ["Clip"]
    assert_matches_eager(lambda x: x.clamp_min(2), (torch.arange(6),))


def test_float_clip_with_one_bound_becomes_max():
    onnx_program = torch_onnx_fx.export(lambda x: x.clamp_min(0.5), (X,), verbose=False)
    ops = [n.op_type for n in onnx_program.model.graph]
    assert "Clip" not in ops and "Max" in ops, ops
    assert isinstance(onnx_program.model, ir.Model)
