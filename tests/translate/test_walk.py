"""translate/walk.py and model.py: the graph walk's contract, on small programs.

Look up, choose, adapt, call, bind: inputs and weights become graph inputs and named
initializers, a result of the wrong dtype gets its Cast, outputs are values of their own, and a
failing translation is reported with its node, operator, translation and the model's line.
"""

from __future__ import annotations

import pytest
import torch
from onnxscript import opset18 as op
from torch import nn

import torch_onnx_fx
from helpers import assert_matches_eager
from torch_onnx_fx.errors import MissingTranslationError, TranslationError
from torch_onnx_fx.ops import builtin_table
from torch_onnx_fx.registry import TranslationTable
from torch_onnx_fx.signature import ProgramSignature
from torch_onnx_fx.translate import check_translatable, translate_program


class Affine(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 2)

    def forward(self, x):
        return self.linear(x).relu()


def _translated(model: nn.Module, args: tuple, opset: int = 18):
    program = torch.export.export(model, args)
    table = TranslationTable(builtin_table(), opset_version=opset)
    signature = ProgramSignature.of(program)
    check_translatable(program, table)
    return translate_program(program, table, opset_version=opset, symbol_names={}, signature=signature), program


def test_user_inputs_become_graph_inputs_and_weights_named_initializers():
    model_ir, _ = _translated(Affine().eval(), (torch.randn(4, 3),))
    graph = model_ir.graph
    assert [v.name for v in graph.inputs] == ["x"]
    assert set(graph.initializers) == {"linear.weight", "linear.bias"}
    assert graph.initializers["linear.weight"].meta["fx_name"] == "p_linear_weight"
    assert model_ir.producer_name == "torch_onnx_fx" and graph.opset_imports[""] == 18
    # Every node carries the FX node it came from.
    assert all("pkg.torch.onnx.fx_node" in node.metadata_props for node in graph)


def test_a_translation_result_of_another_dtype_gets_a_cast():
    def to_double(x):
        return op.Cast(op.Relu(x), to=11)  # float64 where ATen's relu keeps float32

    model = nn.ReLU()
    program = torch_onnx_fx.export(
        model, (torch.randn(3),), custom_translation_table={torch.ops.aten.relu.default: to_double}, verbose=False,
    )
    assert [node.op_type for node in program.model.graph] == ["Relu", "Cast", "Cast"]
    assert_matches_eager(model, (torch.randn(3),), program=program)


def test_outputs_are_values_of_their_own_and_inputs_returned_stay_inputs():
    class Repeats(nn.Module):
        def forward(self, x):
            y = x * 2
            return y, y, x

    program = torch_onnx_fx.export(Repeats(), (torch.randn(3),), verbose=False)
    graph = program.model.graph
    outputs = list(graph.outputs)
    assert len({id(v) for v in outputs}) == 3
    assert outputs[2] is graph.inputs[0]
    assert_matches_eager(Repeats(), (torch.randn(3),), program=program)


def test_a_failing_translation_is_reported_with_its_node_and_the_models_line():
    def broken(x):
        raise ValueError("deliberately broken")

    class Model(nn.Module):
        def forward(self, x):
            return torch.sigmoid(x)  # the line the error must show

    with pytest.raises(TranslationError) as raised:
        torch_onnx_fx.export(Model(), (torch.randn(3),), custom_translation_table={torch.ops.aten.sigmoid.default: broken}, verbose=False)
    message = str(raised.value)
    assert "FX node 'sigmoid' = aten::sigmoid(float32[3])" in message
    assert "(translation broken from custom)" in message and "ValueError: deliberately broken" in message
    assert "test_walk.py" in message and "torch.sigmoid(x)" in message


def test_every_operator_without_translation_is_named_before_translation_starts():
    class Model(nn.Module):
        def forward(self, x):
            return torch.sigmoid(x) + torch.tanh(x)

    program = torch.export.export(Model(), (torch.randn(3),))
    table = TranslationTable(builtin_table())
    table._builtin = {k: v for k, v in table._builtin.items() if k not in ("aten::sigmoid", "aten::tanh")}
    with pytest.raises(MissingTranslationError) as raised:
        check_translatable(program, table)
    assert raised.value.targets == ["aten::sigmoid", "aten::tanh"]
    assert "custom_translation_table" in str(raised.value)


def test_tuple_results_are_taken_apart_by_getitem():
    class TopTwo(nn.Module):
        def forward(self, x):
            values, indices = torch.topk(x, 2)
            return values * 2, indices

    model_ir, _ = _translated(TopTwo(), (torch.randn(5),))
    assert [node.op_type for node in model_ir.graph].count("TopK") == 1
    program = torch_onnx_fx.export(TopTwo(), (torch.randn(5),), verbose=False)
    assert_matches_eager(TopTwo(), (torch.randn(5),), program=program)


def test_symbolic_floats_are_doubles_as_python_floats_are():
    # They were float32 in the graph: sqrt(n) scaling a float64 model came out 3e-8 off (both
    # exporters), and a float64 tensor's item() of 1e300 was inf.
    def scaled(x, y):
        return (
            y * (x.shape[0] ** 0.5), y / (x.shape[0] / 3), (y.float() * (x.shape[0] / 7)).bfloat16(),
            # Python numbers beside a symbolic float: Pow's and Where's operands take no type from
            # each other, and a float32 constant there made a model ONNX Runtime refused.
            y * 0.5 ** x.shape[0], y * 2 ** (x.shape[0] / 3), y * x.shape[0] ** 0.1, y * torch.sym_ite(x.shape[0] > 6, 1.5, 2.5),
        )

    n = torch.export.Dim("n", min=2)
    y = torch.randn(5, dtype=torch.float64)
    more = [((torch.randn(n), torch.randn(n, dtype=torch.float64)), {}) for n in (3, 11, 97)]
    assert_matches_eager(scaled, (torch.randn(5), y), rtol=0, atol=0, dynamic_shapes=({0: n}, {0: n}), more_inputs=more)

    def item(x):
        return x.max().item(), x + x.min().item(), x * x.sum().item()

    # A returned Python float is float32 (torch.onnx's convention); used in the graph it is not
    # rounded on the way: 1e300 and the sum's last digits reach the float64 tensor intact.
    x = torch.tensor([1e300, -3e-310, 1.2345678901234567], dtype=torch.float64)
    program = assert_matches_eager(item, (x,), rtol=0, atol=0)
    assert [v.dtype for v in program.model.graph.outputs] == [torch_onnx_fx.dtypes.onnx_dtype(t) for t in (torch.float32, torch.float64, torch.float64)]


def test_modulo_of_symbolic_floats_takes_the_divisors_sign_as_python_does():
    # ONNX's float Mod is C's fmod (the dividend's sign): (2 / 3 - 5) % 2 was -0.33 for Python's
    # 1.67, and a number modulo a symbolic float failed in ONNX Runtime (fmod=0 on floats).
    def fn(x):
        a = x.shape[0] / 3 - 5.0
        return x * (a % 2.0), x * (a % -0.7), x * (7.5 % (a - 0.5)), x * (x.shape[0] % 4)

    more = [((torch.randn(n),), {}) for n in (2, 3, 7, 10, 31, 59)]
    assert_matches_eager(fn, (torch.randn(4),), rtol=1e-6, atol=1e-7, dynamic_shapes=({0: torch.export.Dim("n", min=2)},), more_inputs=more)
