"""Weights only sliced and stacked (torchlib's LSTM/GRU gate reordering) or used through exact
arithmetic (Gemma's ``1 + weight``, a normalisation by ``sqrt(var + eps)``) are stored as the
result, and apply_weights remakes them from new weights."""

from __future__ import annotations

import collections

import pytest
import torch
from torch import nn

import torch_onnx_fx
from helpers import assert_matches_eager
from torch_onnx_fx.optimize.weights.recipes import RECIPE_KEY


class Tagger(nn.Module):
    def __init__(self, cell: type[nn.RNNBase]):
        super().__init__()
        self.rnn = cell(6, 5, num_layers=2, batch_first=True, bidirectional=True)
        self.head = nn.Linear(10, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.rnn(x)[0])


def _weight_readers(program: torch_onnx_fx.ONNXProgram) -> collections.Counter:
    """The nodes reading the recurrent network's weights, by op type."""
    graph = program.model.graph
    return collections.Counter(
        node.op_type for node in graph
        if any(value is not None and value.name in graph.initializers and value.name.startswith("rnn.") for value in node.inputs)
    )


@pytest.mark.parametrize("cell", [nn.LSTM, nn.GRU])
def test_gate_reordering_is_stored_not_run(cell):
    torch.manual_seed(0)
    model = Tagger(cell).eval()
    x = torch.randn(2, 7, 6)
    program = assert_matches_eager(model, (x,), dynamic_shapes=({0: "batch"},), more_inputs=[((torch.randn(3, 7, 6),), {})])
    # Before: 16 Slices and 5 Concat/Unsqueeze per layer reordered the gates at every inference.
    assert _weight_readers(program) == {cell.__name__: 2}
    arranged = [value for value in program.model.graph.initializers.values() if RECIPE_KEY in value.metadata_props]
    assert len(arranged) == 6  # W, R, B for each of the two layers


@pytest.mark.parametrize("cell", [nn.LSTM, nn.GRU])
def test_apply_weights_remakes_rearranged_weights(cell):
    torch.manual_seed(0)
    x = torch.randn(2, 7, 6)
    program = torch_onnx_fx.export(Tagger(cell).eval(), (x,), verbose=False)
    trained = Tagger(cell).eval()
    program.apply_weights(trained.state_dict())
    assert_matches_eager(trained, (x,), program=program)


def test_rearranged_weights_are_given_together():
    torch.manual_seed(0)
    x = torch.randn(2, 7, 6)
    model = Tagger(nn.LSTM).eval()
    program = torch_onnx_fx.export(model, (x,), verbose=False)
    trained = Tagger(nn.LSTM).eval().state_dict()
    with pytest.raises(torch_onnx_fx.StateDictMismatchError, match=r"rnn.weight_ih_l0: stored combined into one tensor with \['rnn.weight_ih_l0_reverse'\]"):
        program.apply_weights({"rnn.weight_ih_l0": trained["rnn.weight_ih_l0"]}, strict=False)
    with pytest.raises(torch_onnx_fx.StateDictMismatchError, match=r"rnn.weight_hh_l1: shape \(20, 4\), the model has \(20, 5\)"):
        program.apply_weights({**trained, "rnn.weight_hh_l1": torch.zeros(20, 4)})
    # Nothing was replaced by the refused calls.
    assert_matches_eager(model, (x,), program=program)
    program.apply_weights({name: trained[name] for name in trained if name.startswith("rnn.")}, strict=False)
    model.rnn.load_state_dict({name[4:]: trained[name] for name in trained if name.startswith("rnn.")})
    assert_matches_eager(model, (x,), program=program)


def test_meta_built_recurrent_model_gets_its_weights():
    x = torch.randn(2, 7, 6)
    with torch.device("meta"):
        meta = Tagger(nn.GRU).eval()
    program = torch_onnx_fx.export(meta, (x.to("meta"),), verbose=False)
    assert _weight_readers(program) == {"GRU": 2}
    torch.manual_seed(1)
    real = Tagger(nn.GRU).eval()
    program.apply_weights(real.state_dict())
    assert_matches_eager(real, (x,), program=program)


class SliceAndWhole(nn.Module):
    def __init__(self, rows: int, columns: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(rows, columns))

    def forward(self, x):
        return x @ self.weight[: len(self.weight) // 2].T, x @ self.weight.T


def test_weight_also_read_elsewhere_is_not_copied():
    """A large slice of a weight that the graph also reads whole would be a copy beside it: left
    as is (5,000 elements, past the small copies a fold may make)."""
    model = SliceAndWhole(100, 100).eval()
    program = assert_matches_eager(model, (torch.randn(3, 100),))
    assert not any(RECIPE_KEY in value.metadata_props for value in program.model.graph.initializers.values())


def test_small_slice_of_a_weight_read_elsewhere_is_stored():
    """A slice of 16 numbers is stored beside its weight: a Slice less at every inference, and
    apply_weights remakes it."""
    torch.manual_seed(0)
    x = torch.randn(3, 4)
    program = assert_matches_eager(SliceAndWhole(8, 4).eval(), (x,))
    assert "Slice" not in [node.op_type for node in program.model.graph]
    trained = SliceAndWhole(8, 4).eval()
    program.apply_weights(trained.state_dict())
    assert_matches_eager(trained, (x,), program=program)


def test_weight_also_returned_is_not_copied():
    """A region whose move is also a graph output keeps reading the weight: folding the rest would
    store a copy beside it."""

    class SliceAndReturn(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(8, 4))

        def forward(self, x):
            return x @ self.weight[:2].T, self.weight.reshape(-1)

    program = assert_matches_eager(SliceAndReturn().eval(), (torch.randn(3, 4),))
    assert not any(RECIPE_KEY in value.metadata_props for value in program.model.graph.initializers.values())


class WeightArithmetic(nn.Module):
    """Weights used only through correctly rounded arithmetic with constants and each other."""

    def __init__(self, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.offset_scale = nn.Parameter(torch.randn(6, dtype=dtype) * 0.1)
        self.register_buffer("var", torch.rand(6, dtype=dtype) + 0.5)
        self.register_buffer("mean", torch.randn(6, dtype=dtype))
        self.shift = nn.Parameter(torch.randn(6, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normalized = (x - self.mean) / torch.sqrt(self.var + 1e-5)
        return normalized * (1.0 + self.offset_scale) - self.shift * 2.0


def _readers_of(program: torch_onnx_fx.ONNXProgram, names: set[str]) -> list[str]:
    graph = program.model.graph
    return [node.op_type for node in graph if any(value is not None and value.name in names for value in node.inputs)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_weight_arithmetic_is_stored_not_run(dtype):
    torch.manual_seed(0)
    model = WeightArithmetic(dtype).eval()
    x = torch.randn(3, 6, dtype=dtype)
    program = assert_matches_eager(model, (x,), dynamic_shapes=({0: "batch"},), more_inputs=[((torch.randn(5, 6, dtype=dtype),), {})], rtol=0, atol=0)
    # Before: Add(offset_scale, 1), Add(var, eps), Sqrt and Mul(shift, 2) ran at every inference.
    op_types = [node.op_type for node in program.model.graph]
    assert op_types == ["Sub", "Div", "Mul", "Sub"], op_types
    stored = [value for value in program.model.graph.initializers.values() if RECIPE_KEY in value.metadata_props]
    assert len(stored) == 3


def test_apply_weights_remakes_weight_arithmetic():
    torch.manual_seed(0)
    x = torch.randn(3, 6)
    program = torch_onnx_fx.export(WeightArithmetic().eval(), (x,), verbose=False)
    trained = WeightArithmetic().eval()
    program.apply_weights(trained.state_dict())
    assert_matches_eager(trained, (x,), program=program, rtol=0, atol=0)


def test_meta_built_weight_arithmetic_gets_its_weights():
    x = torch.randn(3, 6)
    with torch.device("meta"):
        meta = WeightArithmetic().eval()
    program = torch_onnx_fx.export(meta, (x.to("meta"),), verbose=False)
    assert [node.op_type for node in program.model.graph] == ["Sub", "Div", "Mul", "Sub"]
    torch.manual_seed(1)
    real = WeightArithmetic().eval()
    program.apply_weights(real.state_dict())
    assert_matches_eager(real, (x,), program=program, rtol=0, atol=0)


class OffsetAndPlain(nn.Module):
    """RWKV's token mixing reads ``mix`` and ``1 - mix``."""

    def __init__(self, width: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(width))

    def forward(self, x):
        return x * (1.0 - self.weight), x + self.weight


def test_weight_arithmetic_with_a_large_weight_read_twice_stays():
    """``1 - w`` where the graph also reads ``w`` itself would store a second tensor of 5,000
    numbers: left as is."""
    program = assert_matches_eager(OffsetAndPlain(5000).eval(), (torch.randn(3, 5000),))
    assert sorted(_readers_of(program, {"weight"})) == ["Add", "Sub"]


def test_weight_arithmetic_with_a_small_weight_read_twice_is_stored():
    torch.manual_seed(0)
    x = torch.randn(3, 6)
    program = assert_matches_eager(OffsetAndPlain(6).eval(), (x,))
    assert [node.op_type for node in program.model.graph] == ["Mul", "Add"]
    trained = OffsetAndPlain(6).eval()
    program.apply_weights(trained.state_dict())
    assert_matches_eager(trained, (x,), program=program, rtol=0, atol=0)


class HalfCopies(nn.Module):
    """float32 weights used as float16 (``F.linear(h.half(), w.half(), b.half())``), which the
    graph computes in float32: Cast(Cast(w)) rounds w to float16 and back."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(64, 64)

    def forward(self, x):
        return nn.functional.linear(x.half(), self.proj.weight.half(), self.proj.bias.half()).float()


def test_weights_rounded_to_half_precision_are_stored_rounded():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 64)
    program = assert_matches_eager(HalfCopies().eval(), (x,), rtol=0, atol=0)
    readers = _readers_of(program, set(program.model.graph.initializers))
    assert "Cast" not in readers and "Transpose" not in [node.op_type for node in program.model.graph], readers
    trained = HalfCopies().eval()
    program.apply_weights(trained.state_dict())
    assert_matches_eager(trained, (x,), program=program, rtol=0, atol=0)
    # A float32 weight is still what apply_weights takes.
    with pytest.raises(torch_onnx_fx.errors.StateDictMismatchError):
        program.apply_weights({name: t.half() for name, t in trained.state_dict().items()})


class _TransposedTimesWeight(nn.Module):
    """``A.t() * B``: A is stored transposed before the arithmetic is folded."""

    def __init__(self):
        super().__init__()
        self.a = nn.Parameter(torch.randn(4, 4))
        self.b = nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        return x @ (self.a.t() * self.b)


class _NonPersistentScale(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4))
        self.register_buffer("scale", torch.full((4,), 2.0), persistent=False)

    def forward(self, x):
        return x * (self.w * self.scale)


@pytest.mark.parametrize("make, strict", [(_TransposedTimesWeight, True), (_NonPersistentScale, False)])
def test_recipes_never_keep_replaceable_tensors_as_constants(make, strict):
    """A weight stored transposed, or a non-persistent buffer, is small enough to be a recipe
    constant but is replaced by apply_weights: a recipe holding its old values would leave the
    model stale after apply_weights (found by review)."""
    torch.manual_seed(0)
    model = make().eval()
    x = torch.randn(2, 4)
    program = assert_matches_eager(model, (x,))
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            tensor.normal_()
    program.apply_weights({**model.state_dict(), **dict(model.named_buffers())}, strict=strict)
    assert_matches_eager(model, (x,), program=program)
