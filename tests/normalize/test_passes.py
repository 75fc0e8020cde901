"""The normalize stage's FX passes make ATen's dtype rules explicit before translation."""

from __future__ import annotations

import pytest
import torch

from torch_onnx_fx.normalize.index_dtype import IndexDtypePass
from torch_onnx_fx.normalize.integral_accumulation import IntegralAccumulationPass
from torch_onnx_fx.normalize.result_shapes import ResultShapePass
from torch_onnx_fx.normalize.type_promotion import TypePromotionPass

_CONVERT = torch.ops.prims.convert_element_type.default



def _conversions(module: torch.fx.GraphModule) -> list[torch.dtype]:
    return [n.args[1] for n in module.graph.nodes if n.target is _CONVERT]


def _export(fn, *args) -> torch.fx.GraphModule:
    class M(torch.nn.Module):
        def forward(self, *a):
            return fn(*a)

    return torch.export.export(M(), args).graph_module


def test_real_operand_of_complex_product_becomes_complex():
    module = _export(lambda x, z: x * z, torch.randn(3), torch.randn(3, dtype=torch.complex64))
    result = TypePromotionPass()(module)
    assert result.modified and _conversions(module) == [torch.complex64]
    module.graph.lint()


def test_int_operand_of_float_sum_becomes_float():
    module = _export(lambda a, b: a + b, torch.arange(3), torch.randn(3))
    assert TypePromotionPass()(module).modified and _conversions(module) == [torch.float32]


def test_matching_operands_are_left_alone():
    module = _export(lambda a, b: a + b, torch.randn(3), torch.randn(3))
    assert not TypePromotionPass()(module).modified


def test_bool_sum_accumulates_in_int64():
    module = _export(lambda m: m.sum(), torch.ones(3, dtype=torch.bool))
    assert IntegralAccumulationPass()(module).modified and _conversions(module) == [torch.int64]


def test_int32_indices_become_int64():
    module = _export(lambda x, i: x[i], torch.randn(4), torch.tensor([0, 2], dtype=torch.int32))
    assert IndexDtypePass()(module).modified and _conversions(module) == [torch.int64]


def test_half_precision_reductions_compute_in_float32_and_round_back():
    from torch_onnx_fx.normalize.half_precision import HalfPrecisionAccumulationPass

    module = _export(lambda x: x.sum(0) * 2, torch.randn(4, 3).half())
    assert HalfPrecisionAccumulationPass()(module).modified
    assert _conversions(module) == [torch.float32, torch.float16]
    mul = next(n for n in module.graph.nodes if n.target is torch.ops.aten.mul.Tensor)
    assert mul.args[0].target is _CONVERT and mul.args[0].meta["val"].dtype == torch.float16
    module.graph.lint()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_variance_and_mean_together_compute_in_float32(dtype):
    # var_mean/std_mean return two results; computed step by step in bfloat16 the variance of
    # values near 500 was off by 2 ulps where eager, accumulating in float32, rounds once.
    from helpers import assert_matches_eager

    x = (torch.randn(4, 64) + 500).to(dtype)
    assert_matches_eager(lambda x: (*torch.var_mean(x, dim=-1, correction=2), *torch.std_mean(x, dim=0)), (x,), rtol=0, atol=0)


def test_fused_attention_keeps_half_precision_inputs():
    """At opset 23 attention is one ONNX Attention node whose kernel owns its intermediates'
    precision: the pass leaves it alone (no Casts around it, as torch.onnx emits it)."""
    from helpers import assert_matches_eager

    class Attention(torch.nn.Module):
        def forward(self, q, k, v):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)

    inputs = tuple(torch.rand(2, 3, 16, 8, dtype=torch.float16) for _ in range(3))
    program = assert_matches_eager(Attention(), inputs, opset_version=23, rtol=1e-2, atol=1e-2)
    assert [n.op_type for n in program.model.graph] == ["Attention"]
    # Below opset 23 the written-out attention still accumulates in float32.
    program = assert_matches_eager(Attention(), inputs, rtol=1e-2, atol=1e-2)
    assert "Cast" in [n.op_type for n in program.model.graph]


def test_in_place_ops_on_unobserved_tensors_become_functional():
    from torch_onnx_fx.normalize.functional_in_place import InPlaceToFunctionalPass
    from torch_onnx_fx.ops import builtin_table
    from torch_onnx_fx.registry import TranslationTable

    def model(x):
        h = x + 1
        before = h.sum()  # reads h before the mutation: must keep the old value
        h.mul_(3)
        return h, before

    module = _export(model, torch.randn(2, 3))
    assert InPlaceToFunctionalPass(TranslationTable(builtin_table()))(module).modified
    targets = [n.target for n in module.graph.nodes if n.op == "call_function"]
    assert torch.ops.aten.mul.Tensor in targets and torch.ops.aten.mul_.Tensor not in targets
    mul = next(n for n in module.graph.nodes if n.target is torch.ops.aten.mul.Tensor)
    total = next(n for n in module.graph.nodes if n.target is torch.ops.aten.sum.default)
    assert total.args[0] is mul.args[0]  # the earlier read still sees h + 1
    output = next(n for n in module.graph.nodes if n.op == "output")
    assert output.args[0][0] is mul
    module.graph.lint()
    x = torch.randn(2, 3)
    torch.testing.assert_close(module(x), model(x.clone()))


def test_joined_tensors_take_the_result_dtype():
    """cat/stack promote as ATen does (block_diag of float64 and complex64 is complex128)."""
    import onnx

    from helpers import assert_matches_eager
    from torch_onnx_fx.normalize.type_promotion import JoinPromotionPass

    module = _export(lambda a, b: torch.cat([a, b]), torch.randint(0, 5, (2, 3)), torch.randn(1, 3))
    assert JoinPromotionPass()(module).modified
    assert _conversions(module) == [torch.float32]
    for function, args in [
        (lambda a, b: torch.block_diag(a, b), (torch.randn(1, 5, dtype=torch.float64), torch.randn(2, 5, dtype=torch.complex64))),
        (lambda a, b: torch.stack([a, b]), (torch.randn(3, dtype=torch.float16), torch.randn(3))),
    ]:
        program = assert_matches_eager(function, args)
        onnx.checker.check_model(program.model_proto, full_check=True)


def test_effectful_calls_lose_their_token():
    # linalg.inv's error check is wrapped in with_effects after decomposition; the pass calls it
    # directly and the token chain collapses to the program's token input.
    from torch_onnx_fx.normalize.effect_tokens import EffectTokenPass

    class Inverse(torch.nn.Module):
        def forward(self, x):
            return torch.linalg.inv(x)

    program = torch.export.export(Inverse(), (torch.randn(2, 3, 3),)).run_decompositions()
    module = program.graph_module
    effects = torch.ops.higher_order.with_effects
    assert any(n.target is effects for n in module.graph.nodes)
    result = EffectTokenPass()(module)
    assert result.modified
    assert not any(n.target is effects for n in module.graph.nodes)
    assert not EffectTokenPass()(module).modified


def test_as_strided_of_a_view_is_given_the_base_and_the_views_offset():
    from torch_onnx_fx.normalize.storage_base import StorageBasePass

    def model(x):
        return x[:, 1:].as_strided((2, 2), (4, 1)), x.permute(2, 0, 1).as_strided((3, 4), (1, 3), 2), x.as_strided((2,), (1,))

    module = _export(model, torch.randn(2, 3, 4))
    assert StorageBasePass()(module).modified
    strided = [n for n in module.graph.nodes if n.target == torch.ops.aten.as_strided.default]
    placeholder = next(n for n in module.graph.nodes if n.op == "placeholder")
    assert [n.args[0] for n in strided] == [placeholder] * 3
    # The slice started at storage position 4: the offset the view had is made explicit.
    assert [n.args[3] if len(n.args) > 3 else None for n in strided] == [4, 2, None]
    module.recompile()
    x = torch.randn(2, 3, 4)
    for got, want in zip(module(x), model(x)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_result_shape_pass_gives_one_samples_multilabel_loss_the_real_kernels_shape():
    loss = torch.nn.MultiLabelMarginLoss(reduction="none")
    scores, target = torch.randn(6), torch.tensor([1, 4, -1, 0, 0, 0])
    program = torch.export.export(loss, (scores, target))
    (node,) = [n for n in program.graph.nodes if n.op == "call_function"]
    assert node.meta["val"].shape == (1,)  # torch's fake kernel; eager gives a 0-d loss
    assert ResultShapePass()(program.graph_module).modified
    assert node.meta["val"].shape == loss(scores, target).shape == ()
    # A batch, or another reduction, is sized right already: left as it is.
    batch = torch.export.export(loss, (scores.reshape(2, 3), target.reshape(2, 3).clamp(max=2)))
    assert not ResultShapePass()(batch.graph_module).modified
