"""Opsets 13–17: graphs built at 18 and rewritten, valid at the requested opset, or a clear error."""

from __future__ import annotations

import onnx
import pytest
import torch
from torch import nn

import torch_onnx_fx
from helpers import assert_matches_eager


class Reductions(nn.Module):
    def forward(self, x):
        return x.sum(), x.mean(dim=1), x.amax(dim=-1, keepdim=True), *torch.split(x, 2, dim=1), x.unsqueeze(0).squeeze(0)


class Mish(nn.Module):
    def forward(self, x):
        return nn.functional.mish(x)


class Views(nn.Module):
    def forward(self, x):
        return nn.functional.hardswish(x).view(2, -1), x.view(-1), *torch.meshgrid(x[0], x[1], indexing="ij")


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(4)
        self.linear = nn.Linear(4, 3)

    def forward(self, x):
        return torch.softmax(self.linear(self.norm(x)), -1) * x.shape[1]


CASES = {
    "reductions-and-splits": (Reductions(), (torch.randn(3, 5, 4),), None, [(torch.randn(3, 5, 4),)]),
    "layer-norm-dynamic": (Block(), (torch.randn(2, 5, 4),), ({0: "batch", 1: "seq"},), [(torch.randn(3, 7, 4),)]),
    "mish-written-out": (Mish(), (torch.randn(3, 4),), None, [(torch.randn(3, 4),)]),
    "views-and-hardswish": (Views(), (torch.randn(2, 6),), ({1: "n"},), [(torch.randn(2, 4),)]),
}


@pytest.mark.parametrize("opset", [17, 16, 15, 14, 13])
@pytest.mark.parametrize("case", list(CASES))
def test_graph_is_built_at_the_requested_opset_and_matches_eager(case, opset):
    model, args, shapes, more = CASES[case]
    program = assert_matches_eager(model, args, opset_version=opset, dynamic_shapes=shapes, more_inputs=[(m, {}) for m in more])
    assert program.model.opset_imports[""] == opset
    onnx.checker.check_model(program.model_proto, full_check=True)


def test_layer_norm_below_17_is_written_out_and_half_precision_stays_accurate():
    model = nn.LayerNorm(8).half()
    program = assert_matches_eager(model, (torch.randn(2, 8, dtype=torch.float16),), opset_version=16, rtol=1e-2, atol=1e-3)
    assert "LayerNormalization" not in {n.op_type for n in program.model.graph}


def test_layer_norm_is_kept_at_17():
    program = torch_onnx_fx.export(nn.LayerNorm(8), (torch.randn(2, 8),), opset_version=17, verbose=False)
    assert "LayerNormalization" in {n.op_type for n in program.model.graph}


def test_an_operator_with_no_old_form_names_itself_and_the_opset_it_needs():
    class Spectrum(nn.Module):
        def forward(self, x):
            return torch.fft.rfft(x).abs()

    with pytest.raises(torch_onnx_fx.TranslationError, match=r"Cannot build opset 13: .*DFT.* needs opset 17"):
        torch_onnx_fx.export(Spectrum(), (torch.randn(8),), opset_version=13, verbose=False)


def test_a_reduction_the_old_scatter_lacks_is_declined():
    class Amax(nn.Module):
        def forward(self, x, index, source):
            return x.scatter_reduce(0, index, source, reduce="amax")

    args = (torch.randn(5), torch.tensor([0, 1, 0]), torch.randn(3))
    with pytest.raises(torch_onnx_fx.TranslationError, match="reduction='max', which needs opset 18"):
        torch_onnx_fx.export(Amax(), args, opset_version=17, verbose=False)
    assert_matches_eager(Amax(), args, opset_version=18)


@pytest.mark.parametrize("opset", [13, 17])
def test_reductions_the_runtime_passes_write_take_the_target_form(opset):
    # The runtime passes run after the downgrade: ONNX Runtime's missing float64
    # InstanceNormalization is spelled out with ReduceMean, which wrote opset 18's axes input
    # into an opset 13/17 graph (an invalid model).
    torch.manual_seed(0)
    model = torch.nn.InstanceNorm2d(3, affine=True).double().eval()
    assert_matches_eager(model, (torch.randn(2, 3, 5, 5, dtype=torch.float64),), opset_version=opset)
