"""optimize/recipe.py: what the optimize stage runs, in which case, on a translated model."""

from __future__ import annotations

import onnx_ir as ir
import torch
from torch import nn

import torch_onnx_fx
from helpers import assert_matches_eager
from torch_onnx_fx.ops import builtin_table
from torch_onnx_fx.optimize import optimize_model
from torch_onnx_fx.registry import TranslationTable
from torch_onnx_fx.signature import ProgramSignature
from torch_onnx_fx.translate import translate_program


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        return torch.nn.functional.gelu(self.linear(self.norm(x))) + 0.0 * x


def _translated(model: nn.Module, args: tuple, build_opset: int = 18) -> tuple[ir.Model, ProgramSignature]:
    program = torch.export.export(model, args)
    signature = ProgramSignature.of(program)
    table = TranslationTable(builtin_table(), opset_version=build_opset)
    return translate_program(program, table, opset_version=build_opset, symbol_names={}, signature=signature), signature


def _ops(model: ir.Model) -> list[str]:
    return [node.op_type for node in model.graph]


def test_unoptimized_models_are_only_inlined_and_cleaned():
    model, signature = _translated(Block().eval(), (torch.randn(2, 8),))
    optimize_model(model, opset_version=18, weights=signature.state_names, optimize=False)
    assert not model.functions, "torchlib's scripted functions are inlined even without optimize"
    assert model.ir_version == 10


def test_the_optimizer_folds_and_keeps_every_weight_by_name():
    model, signature = _translated(Block().eval(), (torch.randn(2, 8),))
    unoptimized, _ = _translated(Block().eval(), (torch.randn(2, 8),))
    optimize_model(unoptimized, opset_version=18, weights=signature.state_names, optimize=False)
    optimize_model(model, opset_version=18, weights=signature.state_names)
    assert len(model.graph) < len(unoptimized.graph)
    assert set(signature.state_names) <= set(model.graph.initializers)


def test_below_the_build_opset_the_graph_is_rewritten_to_the_asked_opset():
    model, signature = _translated(Block().eval(), (torch.randn(2, 8),))
    optimize_model(model, opset_version=17, weights=signature.state_names)
    assert model.graph.opset_imports[""] == 17
    assert "LayerNormalization" in _ops(model)  # LayerNormalization exists since 17


def test_fusion_counts_are_reported_at_opset_23_and_custom_opsets_imported():
    class Attention(nn.Module):
        def forward(self, q, k, v):
            return nn.functional.scaled_dot_product_attention(q, k, v)

    args = tuple(torch.randn(1, 2, 4, 8) for _ in range(3))
    model, signature = _translated(Attention(), args, build_opset=23)
    fused = optimize_model(model, opset_version=23, weights=(), extra_opsets={"com.example": 2})
    assert fused == {"Attention": 1}
    assert model.graph.opset_imports["com.example"] == 2
    assert optimize_model(*_translated(Attention(), args, build_opset=23)[:1], opset_version=23, weights=(), fusion_mode="none") == {}


def test_an_exported_model_runs_what_the_recipe_made():
    args, model = (torch.randn(2, 8),), Block().eval()
    for opset in (17, 20, 23):
        program = torch_onnx_fx.export(model, args, opset_version=opset, verbose=False)
        assert program.model.graph.opset_imports[""] == opset
        assert_matches_eager(model, args, program=program)
