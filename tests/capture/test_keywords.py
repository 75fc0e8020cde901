"""Models taking inputs through ``**kwargs`` export with dynamic shapes (torch.export, and so
torch.onnx, fail on them: transformers' FNet, AudioFlamingo3, Granite Speech)."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.export import Dim

import torch_onnx_fx
from helpers import assert_matches_eager


class KeywordBag(nn.Module):
    """``forward(input_ids, **kwargs)`` as in transformers' FNet."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(11, 4)

    def forward(self, input_ids, scale=1.0, **kwargs):
        hidden = self.embed(input_ids) * scale
        return hidden * kwargs["attention_mask"].unsqueeze(-1), kwargs["bias"].sum()


def _call(batch: int, length: int) -> tuple[tuple[torch.Tensor], dict[str, torch.Tensor]]:
    ids = torch.randint(0, 11, (batch, length))
    mask = (torch.rand(batch, length) > 0.3).float()
    return (ids,), {"attention_mask": mask, "bias": torch.randn(length)}


SHAPES = {
    "keyed by keyword": {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}, "bias": {0: "seq"}},
    "nested under **kwargs": {
        "input_ids": {0: "batch", 1: "seq"},
        "kwargs": {"attention_mask": {0: "batch", 1: "seq"}, "bias": {0: "seq"}},
    },
    "sequence": ({0: Dim.DYNAMIC, 1: Dim.DYNAMIC}, {"attention_mask": {0: Dim.DYNAMIC, 1: Dim.DYNAMIC}, "bias": {0: Dim.DYNAMIC}}),
}


@pytest.mark.parametrize("form", list(SHAPES))
def test_keywords_collected_by_var_keyword_take_dynamic_shapes(form):
    model = KeywordBag().eval()
    args, kwargs = _call(2, 5)
    program = assert_matches_eager(model, args, kwargs, dynamic_shapes=SHAPES[form], more_inputs=[_call(3, 7)])
    assert [i.name for i in program.model.graph.inputs] == ["input_ids", "attention_mask", "bias"]
    # Parameters keep their names and the module its own forward afterwards.
    assert "embed.weight" in program.model.graph.initializers
    assert "forward" not in vars(model)
    if form != "sequence":
        assert [str(d) for d in program.model.graph.inputs[1].shape] == ["batch", "seq"]


def test_module_is_restored_when_capture_fails():
    class Fails(nn.Module):
        def forward(self, x, **kwargs):
            if kwargs["y"].sum() > 0:  # data-dependent branch: no strategy captures it
                return x
            return x + 1

    model = Fails()
    with pytest.raises(torch_onnx_fx.errors.CaptureError):
        torch_onnx_fx.export(
            model, (torch.randn(2),), kwargs={"y": torch.randn(2)}, dynamic_shapes={"x": {0: "n"}, "y": {0: "n"}}, verbose=False
        )
    assert "forward" not in vars(model)


class DashedKeyword(nn.Module):
    def forward(self, x, **kwargs):
        return x + kwargs["attention-mask"]


def test_keyword_that_cannot_be_a_parameter_leaves_the_call_as_it_is():
    # "attention-mask" cannot be spelled out as a parameter; torch.export takes the call itself.
    assert_matches_eager(DashedKeyword(), (torch.randn(2, 3),), {"attention-mask": torch.randn(2, 3)})


@pytest.mark.parametrize(
    "shapes",
    [
        ({0: "batch", 1: "seq"}, {"attention_mask": {0: "batch", 1: "seq"}, "bais": {0: "seq"}}),
        {"input_ids": {0: "batch"}, "kwargs": {"atention_mask": {0: "batch"}}},
        {"input_ids": {0: "batch"}, "attention_mask": {0: "batch"}, "kwargs": {"attention_mask": {0: "batch"}}},
    ],
    ids=["misspelled in a sequence", "misspelled nested", "given twice"],
)
def test_shapes_for_keywords_the_call_does_not_pass_are_refused(shapes):
    args, kwargs = _call(2, 5)
    with pytest.raises(torch_onnx_fx.errors.UnsupportedArgumentError, match="dynamic_shapes"):
        torch_onnx_fx.export(KeywordBag().eval(), args, kwargs=kwargs, dynamic_shapes=shapes, verbose=False)
