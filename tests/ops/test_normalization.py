"""Opset-specific translations: single operators where the opset has them, formulas below."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers import assert_matches_eager


def _op_types(program) -> set[str]:
    return {n.op_type for n in program.model.graph}


@pytest.mark.parametrize("opset, fused", [(18, False), (20, True)])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(opset, fused, approximate):
    program = assert_matches_eager(nn.GELU(approximate=approximate), (torch.randn(3, 8),), opset_version=opset)
    assert ("Gelu" in _op_types(program)) == fused


@pytest.mark.parametrize("opset, fused", [(18, False), (21, True)])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm(opset, fused, affine):
    model = nn.GroupNorm(2, 6, affine=affine).eval()
    if affine:
        with torch.no_grad():
            model.weight.normal_()
            model.bias.normal_()
    program = assert_matches_eager(
        model, (torch.randn(2, 6, 5, 5),), opset_version=opset, dynamic_shapes=({0: "batch", 2: "h"},),
        more_inputs=[((torch.randn(3, 6, 4, 5),), {})],
    )
    assert ("GroupNormalization" in _op_types(program)) == fused


@pytest.mark.parametrize("opset, fused", [(18, False), (23, True)])
@pytest.mark.parametrize("eps", [None, 1e-3])
def test_rms_norm(opset, fused, eps):
    model = nn.RMSNorm(8, eps=eps).eval()
    with torch.no_grad():
        model.weight.normal_()
    program = assert_matches_eager(model, (torch.randn(2, 3, 8),), opset_version=opset)
    assert ("RMSNormalization" in _op_types(program)) == fused
    assert len(program.model.graph) <= 8
