"""registry.py: the translation table's layers, and the rules that choose among candidates."""

from __future__ import annotations

import pytest
import torch
from onnxscript import opset18 as op

from torch_onnx_fx.errors import UnsupportedArgumentError
from torch_onnx_fx.ops import builtin_table
from torch_onnx_fx.registry import OURS, TORCHLIB, CUSTOM, Translation, TranslationTable, complex_translation, target_key, target_name


class _Call(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _node(fn, *args):
    """The first call_function node of ``fn`` captured on ``args``."""
    program = torch.export.export(_Call(fn), args)
    return next(n for n in program.graph.nodes if n.op == "call_function")


def test_the_built_in_table_puts_our_translations_before_torchlibs():
    table = builtin_table()
    sources = [t.source for t in table["aten::sym_size.int"]]
    assert sources[0] == OURS and TORCHLIB in sources
    assert builtin_table() is table  # assembled once per process


def test_a_custom_entry_replaces_the_built_in_ones():
    def mine(x):
        return op.Identity(x)

    # einsum: only torchlib translates it (pick another op if ours ever does).
    table = TranslationTable(builtin_table(), {torch.ops.aten.einsum.default: mine})
    assert [(t.function, t.source) for t in table.candidates("aten::einsum")] == [(mine, CUSTOM)]
    assert table.custom_targets == {"aten::einsum"}
    assert TranslationTable(builtin_table()).source_of("aten::einsum") == TORCHLIB


def test_translations_newer_than_the_opset_or_fused_are_not_candidates():
    at_18 = TranslationTable(builtin_table(), opset_version=18)
    at_23 = TranslationTable(builtin_table(), opset_version=23)
    unfused = TranslationTable(builtin_table(), opset_version=23, fused_translations=False)
    key = "aten::scaled_dot_product_attention"
    assert not any(t.fused for t in at_18.candidates(key))
    assert any(t.fused for t in at_23.candidates(key))
    assert not any(t.fused for t in unfused.candidates(key))


def test_onnxruntime_translations_only_when_asked_and_then_first():
    def standard(x):
        return op.Relu(x)

    def runtime(x):
        return op.Identity(x)

    builtin = {"aten::relu": (Translation(standard, OURS), Translation(runtime, OURS, onnxruntime=True))}
    assert [t.function for t in TranslationTable(builtin).candidates("aten::relu")] == [standard]
    chosen = TranslationTable(builtin, onnxruntime_translations=True).candidates("aten::relu")
    assert [t.function for t in chosen] == [runtime, standard]


def test_a_node_with_complex_tensors_goes_only_to_complex_translations():
    node = _node(torch.exp, torch.randn(3, dtype=torch.complex64))
    table = TranslationTable(builtin_table())
    chosen = table.candidates(node.target, node)
    assert chosen and all(t.complex for t in chosen)
    real = _node(torch.exp, torch.randn(3))
    assert not any(t.complex for t in table.candidates(real.target, real))


def test_an_unmarked_custom_translation_is_not_given_complex_nodes():
    def mine(x):
        return op.Identity(x)

    node = _node(torch.exp, torch.randn(3, dtype=torch.complex64))
    assert TranslationTable(builtin_table(), {torch.ops.aten.exp.default: mine}).candidates(node.target, node) == []
    marked = TranslationTable(builtin_table(), {torch.ops.aten.exp.default: complex_translation(mine)})
    assert [t.function for t in marked.candidates(node.target, node)] == [mine]


@pytest.mark.parametrize(
    "key, message",
    [
        (torch.ops.aten.relu, "is an OpOverloadPacket; use a specific overload such as aten.relu.default"),
        ("relu", "is not a qualified operator name"),
        (3, "is not a torch operator or callable"),
    ],
)
def test_custom_keys_that_name_no_overload_are_refused(key, message):
    with pytest.raises(UnsupportedArgumentError, match=message):
        TranslationTable(builtin_table(), {key: lambda x: x})


def test_targets_are_keyed_and_named_as_errors_show_them():
    assert target_key(torch.ops.aten.add.Tensor) == "aten::add.Tensor"
    assert target_name(torch.ops.aten.add.Tensor) == "aten::add.Tensor"
    import operator

    assert target_key(operator.mul) is operator.mul
    assert target_name(operator.mul) == "_operator.mul"
