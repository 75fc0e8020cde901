"""export_modules_as_functions: module instances as calls of deduplicated ONNX functions.

Every model here is exported twice, inlined and with functions; the function export must give
ONNX Runtime's outputs of the inlined one bit for bit (the functions hold the same nodes) and
match eager PyTorch.
"""

from __future__ import annotations

import onnx
import onnxruntime as ort
import pytest
import torch
from torch import nn

import torch_onnx_fx
from helpers import assert_matches_eager

transformers = pytest.importorskip("transformers", reason="the decoder-layer cases build a transformers Llama")
from transformers.models.llama import modeling_llama  # noqa: E402


def _llama(layers: int = 3) -> nn.Module:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=layers, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=100, use_cache=False,
    )
    return transformers.LlamaForCausalLM(config).eval()


def _functions(program: torch_onnx_fx.ONNXProgram) -> dict[str, onnx.FunctionProto]:
    proto = program.model_proto
    onnx.checker.check_model(proto, full_check=True)
    return {f.name: f for f in proto.functions}


def _calls(nodes, name: str) -> list[onnx.NodeProto]:
    return [n for n in nodes if n.op_type == name]


def _same_as_inlined(model: nn.Module, args: tuple, program: torch_onnx_fx.ONNXProgram, **options) -> None:
    inlined = torch_onnx_fx.export(model, args, verbose=False, **options)
    assert not inlined.model.functions
    for expected, actual in zip(inlined(*args), program(*args), strict=True):
        assert torch.equal(expected, actual)


def test_every_decoder_layer_calls_one_function_with_dynamic_shapes():
    model, ids = _llama(4), torch.randint(0, 100, (2, 7))
    shapes = ({0: "batch", 1: "sequence"},)
    program = assert_matches_eager(
        model, (ids,), dynamic_shapes=shapes, export_modules_as_functions=True,
        more_inputs=[((torch.randint(0, 100, (3, 11)),), {})],
    )
    functions = _functions(program)
    assert list(functions) == ["LlamaDecoderLayer"]
    layer = functions["LlamaDecoderLayer"]
    assert layer.domain == "transformers.models.llama.modeling_llama"
    calls = _calls(program.model_proto.graph.node, "LlamaDecoderLayer")
    assert [c.name for c in calls] == [f"model.layers.{i}" for i in range(4)]
    # Weights stay initializers of the main graph, passed in by each call.
    initializers = {i.name for i in program.model_proto.graph.initializer}
    assert "model.layers.2.input_layernorm.weight" in calls[2].input
    assert "model.layers.2.input_layernorm.weight" in initializers
    assert not any(n.op_type == "MatMul" for n in program.model_proto.graph.node[:-1])
    _same_as_inlined(model, (ids,), program, dynamic_shapes=shapes)


class _Block(nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.linear, self.scale = nn.Linear(8, 8), scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x)) * self.scale + x


class _Stack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([_Block(2.0), _Block(2.0), _Block(3.0)])
        self.head = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        for block in self.blocks:
            x = block(x)
        return self.head(x), x.sum()


def test_instances_of_other_configurations_get_their_own_function():
    model, args = _Stack().eval(), (torch.randn(3, 8),)
    program = assert_matches_eager(model, args, export_modules_as_functions=True)
    functions = _functions(program)
    # The two blocks scaled by 2 share a body; the Linears side by side in ``head`` are no
    # repeated block (they have no submodules), so only an explicit class would outline them.
    assert sorted(functions) == ["_Block", "_Block_2"]
    assert [c.op_type for c in program.model_proto.graph.node if c.domain == functions["_Block"].domain] == [
        "_Block", "_Block", "_Block_2",
    ]
    _same_as_inlined(model, args, program)


def test_explicit_classes_nest():
    model, ids = _llama(2), torch.randint(0, 100, (2, 5))
    classes = {modeling_llama.LlamaDecoderLayer, modeling_llama.LlamaMLP, modeling_llama.LlamaRMSNorm}
    program = assert_matches_eager(model, (ids,), export_modules_as_functions=classes)
    functions = _functions(program)
    assert sorted(functions) == ["LlamaDecoderLayer", "LlamaMLP", "LlamaRMSNorm"]
    layer = functions["LlamaDecoderLayer"]
    assert len(_calls(layer.node, "LlamaMLP")) == 1 and len(_calls(layer.node, "LlamaRMSNorm")) == 2
    # The final norm sits outside every layer: called from the main graph.
    assert len(_calls(program.model_proto.graph.node, "LlamaRMSNorm")) == 1
    _same_as_inlined(model, (ids,), program)


class _CondBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear, self.weight = nn.Linear(8, 8), nn.Parameter(torch.randn(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda x: self.linear(x) * self.weight, lambda x: x - self.weight, (x,))


class _Chain(nn.Module):
    """Blocks in a ModuleList, each fed the previous one's result."""

    def __init__(self, *blocks: nn.Module) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


def test_weights_read_inside_a_branch_become_function_inputs():
    torch.manual_seed(0)
    model = _Chain(_CondBlock(), _CondBlock()).eval()
    x = torch.randn(3, 8)
    program = assert_matches_eager(model, (x,), export_modules_as_functions=True, more_inputs=[((-x.abs() - 1,), {})])
    block = _functions(program)["_CondBlock"]
    assert [n.op_type for n in block.node if n.op_type == "If"] == ["If"]
    assert "weight" in block.input


def test_saved_with_external_data_loads_and_takes_new_weights(tmp_path):
    model, ids = _llama(2), torch.randint(0, 100, (1, 6))
    program = torch_onnx_fx.export(model, (ids,), verbose=False, export_modules_as_functions=True)
    other = _llama(2)
    for parameter in other.parameters():
        parameter.data.normal_()
    program.apply_weights(other.state_dict())
    path = tmp_path / "model.onnx"
    program.save(path, external_data=True)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    (logits,) = session.run(None, {session.get_inputs()[0].name: ids.numpy()})
    torch.testing.assert_close(torch.from_numpy(logits), other(ids).logits.detach(), rtol=1e-4, atol=1e-4)


def test_optimize_again_keeps_the_functions():
    model, ids = _llama(2), torch.randint(0, 100, (1, 6))
    program = torch_onnx_fx.export(model, (ids,), verbose=False, export_modules_as_functions=True)
    before = program(ids)
    program.optimize()
    assert list(_functions(program)) == ["LlamaDecoderLayer"]
    assert torch.equal(program(ids)[0], before[0])


def test_no_functions_without_the_argument():
    program = torch_onnx_fx.export(_Stack().eval(), (torch.randn(3, 8),), verbose=False)
    assert not program.model_proto.functions


class _EveryHiddenState(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([_Block(2.0) for _ in range(3)])

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        states = []
        for block in self.blocks:
            x = block(x)
            states.append(x)
        return states


def test_block_results_that_are_also_model_outputs():
    model, args = _EveryHiddenState().eval(), (torch.randn(3, 8),)
    program = assert_matches_eager(model, args, export_modules_as_functions=True)
    assert list(_functions(program)) == ["_Block"]
    assert [o.name for o in program.model_proto.graph.output] == [o.name for o in torch_onnx_fx.export(model, args, verbose=False).model_proto.graph.output]
    _same_as_inlined(model, args, program)


class _NormBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.norm = nn.Conv2d(2, 2, 1, bias=False), nn.BatchNorm2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.norm(self.conv(x))) + x


def test_weights_folded_into_small_tensors_stay_replaceable():
    # BatchNorm is folded into the convolution's 4-element weight: small, but made of weights,
    # so it must stay an initializer apply_weights reaches, not a constant inside the function.
    torch.manual_seed(0)
    model = nn.Sequential(_NormBlock(), _NormBlock()).eval()
    x = torch.randn(1, 2, 6, 6)
    program = torch_onnx_fx.export(model, (x,), verbose=False, export_modules_as_functions=True)
    assert list(_functions(program)) == ["_NormBlock"]
    other = nn.Sequential(_NormBlock(), _NormBlock()).eval()
    for block in other:
        block.norm.running_mean.normal_()
        block.norm.running_var.uniform_(0.5, 2.0)
        block.norm.weight.data.normal_()
    program.apply_weights(other.state_dict())
    assert_matches_eager(other, (x,), program=program)


class _IndexBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Index arithmetic on sizes, the same in every block: the optimizer computes it once.
        rows = torch.arange(x.shape[0] * 2, device=x.device) // 2
        return torch.relu(self.linear(x[rows])).reshape(x.shape[0], 2, 8).mean(1) + x


def test_index_arithmetic_shared_by_every_block_is_computed_outside_them():
    torch.manual_seed(0)
    model = nn.Sequential(_IndexBlock(), _IndexBlock(), _IndexBlock()).eval()
    x = torch.randn(5, 8)
    program = assert_matches_eager(
        model, (x,), dynamic_shapes=({0: "rows"},), export_modules_as_functions=True,
        more_inputs=[((torch.randn(7, 8),), {})],
    )
    assert list(_functions(program)) == ["_IndexBlock"]
    _same_as_inlined(model, (x,), program, dynamic_shapes=({0: "rows"},))



class Scaled(nn.Module):
    def __init__(self, k: float) -> None:
        super().__init__()
        self.linear, self.k = nn.Linear(8, 8), k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x)) * self.k


class Scaled_2(nn.Module):  # noqa: N801 - named as Scaled's second body is, on purpose
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.linear(x))


def test_a_class_named_like_a_numbered_body_gets_a_name_of_its_own():
    # Scaled's second body would be "Scaled_2", the name of the other class: two bodies under one
    # name would both run the one defined last.
    torch.manual_seed(0)
    model, args = _Chain(Scaled(1.0), Scaled(3.0), Scaled_2(), Scaled_2()).eval(), (torch.randn(2, 8),)
    program = assert_matches_eager(model, args, export_modules_as_functions=True)
    assert [f.name for f in program.model_proto.functions] == ["Scaled", "Scaled_2", "Scaled_2_2"]
    _same_as_inlined(model, args, program)


class _WeightNamedLikeANode(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        # "linear" is also the name torch.export gives the F.linear node inside the block.
        self.linear, self.inner = nn.Parameter(torch.randn(8, 8)), nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(nn.functional.linear(x, self.linear))


def test_function_inputs_never_take_the_name_of_a_value_in_the_body():
    torch.manual_seed(0)
    model, args = nn.Sequential(_WeightNamedLikeANode(), _WeightNamedLikeANode()).eval(), (torch.randn(2, 8),)
    program = assert_matches_eager(model, args, export_modules_as_functions=True)
    (function,) = _functions(program).values()  # the full check refuses a function not in SSA form
    _same_as_inlined(model, args, program)


class _ResidualBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.norm1 = nn.Conv2d(4, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4)
        self.conv2, self.norm2 = nn.Conv2d(4, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.norm2(self.conv2(torch.relu(self.norm1(self.conv1(x))))) + x)


def test_nodes_the_optimizer_rewrites_stay_in_their_block():
    # onnxscript's rewriter fuses each BatchNorm into a new Conv node; the Conv must still be
    # known as the block's, not left between the calls.
    torch.manual_seed(0)
    model, args = nn.Sequential(_ResidualBlock(), _ResidualBlock()).eval(), (torch.randn(1, 4, 6, 6),)
    program = assert_matches_eager(model, args, export_modules_as_functions=True)
    assert [n.op_type for n in program.model_proto.graph.node] == ["_ResidualBlock"] * 2
    assert [n.op_type for n in _functions(program)["_ResidualBlock"].node] == ["Conv", "Relu", "Conv", "Add", "Relu"]
    _same_as_inlined(model, args, program)
    # Asked for the convolutions, which the fusion made anew: one function, called four times.
    convs = assert_matches_eager(model, args, export_modules_as_functions={nn.Conv2d})
    assert list(_functions(convs)) == ["Conv2d"]
    assert [n.op_type for n in convs.model_proto.graph.node].count("Conv2d") == 4


class _TableBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        # The same float arithmetic on a table every block is given (GPT-J repeats its rotary
        # tables so): computed once by the optimizer, it must not become block 0's alone.
        scale = torch.cos(table).repeat_interleave(2) + 1
        return torch.relu(self.linear(x)) * scale + x


class _TableStack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([_TableBlock() for _ in range(3)])

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        table = positions * 0.5
        for block in self.blocks:
            x = block(x, table)
        return x


def test_float_arithmetic_shared_by_every_block_is_computed_outside_them():
    torch.manual_seed(0)
    model, args = _TableStack().eval(), (torch.randn(2, 8), torch.arange(4.0))
    program = assert_matches_eager(model, args, export_modules_as_functions=True)
    assert list(_functions(program)) == ["_TableBlock"]
    _same_as_inlined(model, args, program)
