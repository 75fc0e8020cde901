"""program/weights.py: a state dict checked against the model, key by key, before anything changes."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import torch_onnx_fx
from helpers import assert_matches_eager
from torch_onnx_fx.errors import ArgumentTypeError, StateDictMismatchError
from torch_onnx_fx.program.weights import apply_weights


class TwoLayers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(4, 8)
        self.second = nn.Linear(8, 2)
        self.register_buffer("scale", torch.tensor(2.0))

    def forward(self, x):
        # second's weight is used transposed on a 3-d input: stored transposed, still named.
        return self.second(torch.relu(self.first(x))) * self.scale


def _exported(model: nn.Module) -> torch_onnx_fx.ONNXProgram:
    return torch_onnx_fx.export(model, (torch.randn(2, 3, 4),), verbose=False)


def test_new_weights_replace_the_old_and_the_model_computes_with_them():
    exported, other = TwoLayers().eval(), TwoLayers().eval()
    program = _exported(exported)
    names = program.signature.state_names
    replaced = apply_weights(program.model, other.state_dict(), names)
    assert replaced == len(other.state_dict())
    program.release()
    x = torch.randn(2, 3, 4)
    assert_matches_eager(other, (x,), program=program)


def test_every_misfit_is_listed_and_nothing_is_replaced():
    model = TwoLayers().eval()
    program = _exported(model)
    before = {name: value.const_value.numpy().copy() for name, value in program.model.graph.initializers.items()}
    state = dict(TwoLayers().state_dict())
    del state["first.bias"]
    state["second.weight"] = torch.zeros(3, 3)
    state["extra.weight"] = torch.zeros(1)
    with pytest.raises(StateDictMismatchError) as raised:
        apply_weights(program.model, state, program.signature.state_names)
    error = raised.value
    assert error.missing == ["first.bias"] and error.unexpected == ["extra.weight"]
    assert error.mismatched == ["second.weight"]
    after = {name: value.const_value.numpy() for name, value in program.model.graph.initializers.items()}
    assert before.keys() == after.keys() and all((before[k] == after[k]).all() for k in before)


def test_not_strict_updates_only_the_named_weights():
    model = TwoLayers().eval()
    program = _exported(model)
    new_bias = torch.full((2,), 3.0)
    assert apply_weights(program.model, {"second.bias": new_bias, "unknown": torch.zeros(1)}, program.signature.state_names, strict=False) == 1
    program.release()
    with torch.no_grad():
        model.second.bias.copy_(new_bias)
    assert_matches_eager(model, (torch.randn(2, 3, 4),), program=program)


def test_not_strict_with_no_key_of_the_model_warns():
    # A state dict under another prefix ("model.first.bias") replaced nothing, silently.
    program = _exported(TwoLayers().eval())
    prefixed = {f"model.{name}": tensor for name, tensor in TwoLayers().state_dict().items()}
    with pytest.warns(UserWarning, match=r"none of the 5 key\(s\).*nothing was replaced. Its weights are named like \['first.bias'"):
        program.apply_weights(prefixed, strict=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        program.apply_weights({"second.bias": torch.zeros(2), "unknown": torch.zeros(1)}, strict=False)


@pytest.mark.parametrize("state, message", [([1, 2], "expected a dict"), ({"first.bias": [0.0] * 8}, "are not tensors")])
def test_what_is_not_a_state_dict_is_refused(state, message):
    program = _exported(TwoLayers().eval())
    with pytest.raises(ArgumentTypeError, match=message):
        apply_weights(program.model, state, program.signature.state_names)
