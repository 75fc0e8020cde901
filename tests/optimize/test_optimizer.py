"""Our onnx-ir passes: same results as onnxscript's, less work."""

from __future__ import annotations

import logging

import onnx_ir as ir
import pytest
import torch
from torch import nn

import onnxscript.optimizer
import torch_onnx_fx
from torch_onnx_fx.optimize import optimizer
from torch_onnx_fx.optimize.rewrite_rules import RelevantRulesRewritePass, _op_types
from helpers import assert_matches_eager


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x):
        y = torch.relu(torch.relu(self.bn(self.conv(x))))
        return y.reshape(y.shape[0], -1).reshape(-1, 4)


def test_optimizer_matches_onnxscript_optimize_ir():
    program = torch_onnx_fx.export(Model().eval(), (torch.randn(2, 3, 8, 8),), optimize=False, verbose=False)
    ours = ir.from_proto(program.model_proto)
    theirs = ir.from_proto(program.model_proto)
    optimizer.optimize(ours)
    onnxscript.optimizer.optimize_ir(theirs)
    assert [n.op_type for n in ours.graph] == [n.op_type for n in theirs.graph]
    # The Conv+BatchNorm fusion and the double-Relu rule did fire.
    assert "BatchNormalization" not in {n.op_type for n in ours.graph}
    assert [n.op_type for n in ours.graph].count("Relu") == 1


def test_irrelevant_rules_are_skipped():
    program = torch_onnx_fx.export(nn.Linear(4, 4), (torch.randn(2, 4),), optimize=False, verbose=False)
    rewrite = RelevantRulesRewritePass()
    present = _op_types(program.model)
    rule_set = rewrite._rule_set(present)
    names = {rule.name for rule in rule_set.rules}
    assert "FuseBatchNormIntoConv" not in names
    assert "RemoveOptionalBiasFromGemm" in names or "Gemm" not in {op for _, op in present}


def test_optimizer_keeps_small_constants_and_removes_exact_no_ops():
    """onnxscript's no-op rules match constants with a tolerance (1e-12 counts as 0, 1.000001 as
    1); ours compare exactly, so an epsilon guard survives and true no-ops still disappear."""

    class Model(torch.nn.Module):
        def forward(self, x):
            return 1 / (x * x + 1e-12), x * 1.000001, x - 1e-9, x / 1.000001, x * 1 - 0, (x - 0) / 1, 1 / (x + 0.0)

    x = torch.tensor([0.0, 1e-7, 1.0, -0.0])  # x + 0.0 is +0.0 at -0.0: that Add must stay
    program = torch_onnx_fx.export(Model(), (x,), verbose=False)
    for actual, expected in zip(program(x), Model()(x)):
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    ops = [node.op_type for node in program.model.graph]
    # Left: x*x, x*1.000001, +1e-12, +0.0, -1e-9, /1.000001 (and reciprocals); x*1-0 and (x-0)/1 are gone.
    assert (ops.count("Mul"), ops.count("Add"), ops.count("Sub"), ops.count("Div")) == (2, 2, 1, 1), ops


def test_constants_the_folder_cannot_evaluate_are_not_warned_about(caplog):
    # ONNX's reference GatherElements fails on BERT's token-type buffer; the node is just not
    # folded. onnxscript's warning about it is kept at debug level in our log.
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=32, vocab_size=100)
    model = transformers.BertModel(config).eval()
    with caplog.at_level(logging.DEBUG):
        assert_matches_eager(model, (torch.zeros(1, 16, dtype=torch.long),))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "Evaluation failed" in r.getMessage()]
    assert [
        r for r in caplog.records
        if r.name == "torch_onnx_fx.optimize.optimizer" and r.levelno == logging.DEBUG and "Evaluation failed" in r.getMessage()
    ]


def test_third_party_warnings_are_quieted_by_logger_and_level_while_optimizing(caplog):
    # Whatever the message: below ERROR it is debug in our log, from ERROR on it is theirs.
    from torch_onnx_fx.optimize.optimizer import _QUIETED_LOGGERS, _third_party_warnings_quieted

    with caplog.at_level(logging.DEBUG), _third_party_warnings_quieted():
        for name in _QUIETED_LOGGERS:
            logging.getLogger(name).warning("some warning %d", 1)
            logging.getLogger(name).error("some error")
    theirs = [(r.name, r.levelno) for r in caplog.records if r.name in _QUIETED_LOGGERS]
    assert theirs == [(name, logging.ERROR) for name in _QUIETED_LOGGERS]
    ours = [r.getMessage() for r in caplog.records if r.name == "torch_onnx_fx.optimize.optimizer"]
    assert ours == [f"{name}: some warning 1" for name in _QUIETED_LOGGERS]
    # Outside the optimizer nothing is filtered.
    caplog.clear()
    logging.getLogger(_QUIETED_LOGGERS[0]).warning("after")
    assert [r.levelno for r in caplog.records] == [logging.WARNING]


def test_shape_arithmetic_on_sizes_folding_made_static_is_folded():
    """torchlib's pixel_unshuffle computes its shapes at run time from values it leaves unshaped;
    once folding made them static, the next round folds the arithmetic: Reshape, Transpose,
    Reshape, as torch.onnx's graph has (it was 10 nodes with Shape/Div/Concat)."""
    program = assert_matches_eager(lambda x: nn.functional.pixel_unshuffle(x, 2), (torch.randn(1, 2, 10, 12),))
    assert [node.op_type for node in program.model.graph] == ["Reshape", "Transpose", "Reshape"]
    dynamic = assert_matches_eager(
        lambda x: nn.functional.pixel_unshuffle(x, 2), (torch.randn(1, 2, 10, 12),),
        dynamic_shapes=({2: torch.export.Dim("h", min=2) * 2},), more_inputs=[((torch.randn(1, 2, 6, 12),), {})],
    )
    assert "Shape" in [node.op_type for node in dynamic.model.graph]


def test_static_dims_of_a_partly_dynamic_shape_are_folded():
    """unfold along a static dim of an input with a dynamic batch: torchlib reads the dim's size
    at run time (Shape, Gather, Squeeze, Sub, Range, Unsqueeze, Add); it is a constant."""
    x = torch.randn(2, 1024)
    program = assert_matches_eager(
        lambda w: w.unfold(1, 64, 32), (x,), dynamic_shapes=({0: "batch"},), more_inputs=[((torch.randn(3, 1024),), {})]
    )
    assert [node.op_type for node in program.model.graph] == ["Gather"]


def test_expand_to_the_values_own_symbolic_shape_is_removed():
    """torchlib's index_put expands the values to a shape it computes at run time; for index_add
    along a dynamic dim that shape is the values' own ([n, batch]), so the Expand and the shape
    arithmetic before it go (12 nodes to 7, as torch.onnx's graph)."""
    dims = {0: "batch", 1: "n"}
    x, index = torch.randn(2, 6), torch.randint(0, 6, (2, 6))
    program = assert_matches_eager(
        lambda t, i: t.index_add(1, i[0], t * 2.0), (x, index), dynamic_shapes=(dims, dims),
        more_inputs=[((torch.randn(3, 7), torch.randint(0, 7, (3, 7))), {})],
    )
    assert "Expand" not in [node.op_type for node in program.model.graph]
