"""Higher-order operators become ONNX If / Loop / Scan, or are inlined."""

from __future__ import annotations

import onnx_ir as ir
import pytest
import torch
from torch import nn
from torch._higher_order_ops.map import map as hop_map
from torch._higher_order_ops.scan import scan
from torch._higher_order_ops.while_loop import while_loop

import torch_onnx_fx
from helpers import assert_matches_eager, no_translation


def _ops(program) -> list[str]:
    return [n.op_type for n in program.model.graph]


class CondModel(nn.Module):
    """Branches reading a parameter, a buffer and an outer tensor, with two outputs each."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(3))
        self.register_buffer("shift", torch.randn(3))

    def forward(self, x, y):
        def then_branch(x, y):
            return x * self.weight + y, (x + self.shift).sum(0)

        def else_branch(x, y):
            return x - self.weight, (x * y).mean(0)

        return torch.cond(x.sum() > 0, then_branch, else_branch, (x, y))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_with_params_buffers_and_two_outputs(sign):
    model = CondModel().eval()
    x, y = torch.rand(4, 3) * sign, torch.randn(4, 3)
    program = assert_matches_eager(
        model, (x, y), dynamic_shapes=({0: "n"}, {0: "n"}),
        more_inputs=[((-x[:2], y[:2]), {}), ((x.abs() + 1, y), {})],
    )
    assert "If" in _ops(program)
    if_node = next(n for n in program.model.graph if n.op_type == "If")
    then_graph = if_node.attributes["then_branch"].as_graph()
    assert all("namespace" in n.metadata_props for n in then_graph)


def test_nested_cond_and_shape_predicate():
    class Nested(nn.Module):
        def forward(self, x):
            def outer_true(x):
                return torch.cond(x.mean() > 0, lambda x: x + 1, lambda x: x - 1, (x,))

            return torch.cond(x.shape[0] > 3, outer_true, lambda x: x * 10, (x,))

    model = Nested()
    assert_matches_eager(
        model, (torch.randn(5, 2),), dynamic_shapes=({0: "n"},),
        more_inputs=[((torch.randn(2, 2),), {}), ((-torch.rand(6, 2),), {}), ((torch.rand(4, 2),), {})],
    )


def test_scan_with_carry_and_stacked_outputs():
    class Cumulative(nn.Module):
        def forward(self, xs):
            def combine(carry, x):
                new = carry * 0.5 + x
                return new, new.sum()

            return scan(combine, torch.zeros(xs.shape[1]), xs)

    program = assert_matches_eager(
        Cumulative(), (torch.randn(5, 3),), dynamic_shapes=({0: "steps"},), more_inputs=[((torch.randn(8, 3),), {})]
    )
    assert "Scan" in _ops(program)


def test_body_values_never_share_a_name_with_main_graph_values():
    # FX names are per graph: the body's `exp` and the main graph's `exp` after the Scan were both
    # named "exp", which ONNX Runtime rejects ("not in single static assignment form"); RWKV hit it.
    class ScanThenExp(nn.Module):
        def forward(self, xs):
            def combine(carry, x):
                carry = carry * torch.exp(x)
                return carry, carry.clone()

            last, ys = scan(combine, torch.ones(xs.shape[1]), xs)
            return torch.exp(last) + ys.sum(0)

    program = assert_matches_eager(ScanThenExp(), (torch.randn(5, 3) * 0.1,))
    names = [v.name for node in ir.traversal.RecursiveGraphIterator(program.model.graph) for v in node.outputs]
    assert len(names) == len(set(names))


def test_while_loop():
    class Doubling(nn.Module):
        def forward(self, x):
            def cond_fn(i, value):
                return value.sum() < 100

            def body_fn(i, value):
                return i + 1, value * 2

            return while_loop(cond_fn, body_fn, (torch.tensor(0), x))

    program = assert_matches_eager(Doubling(), (torch.rand(3) + 0.1,), more_inputs=[((torch.rand(3) * 30,), {})])
    assert "Loop" in _ops(program)


@pytest.mark.parametrize("optimize", [False, True])
def test_two_while_loops(optimize):
    # Each loop's condition is inlined into the main graph for the first test; both FX graphs
    # name their comparison ``lt``, which the model defined twice (ONNX Runtime refused it).
    class TwoLoops(nn.Module):
        def forward(self, x):
            _, doubled = while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 2), (torch.tensor(0), x))
            _, shifted = while_loop(lambda i, y: i < 4, lambda i, y: (i + 1, y + 1), (torch.tensor(0), doubled))
            return shifted

    program = assert_matches_eager(TwoLoops(), (torch.randn(3),), optimize=optimize)
    assert _ops(program).count("Loop") == 2


def test_map():
    class Mapped(nn.Module):
        def forward(self, xs, y):
            return hop_map(lambda x, y: x * y + 1, xs, y)

    assert_matches_eager(Mapped(), (torch.randn(4, 3), torch.randn(3)))


def test_no_grad_region_is_inlined():
    class NoGrad(nn.Module):
        def forward(self, x):
            with torch.no_grad():
                y = x * 3
            return y + 1

    program = assert_matches_eager(NoGrad(), (torch.randn(3),))
    assert set(_ops(program)) <= {"Mul", "Add"}


def test_untranslatable_op_inside_a_branch_is_reported():
    class Bad(nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda x: no_translation(x, 2.0), lambda x: x * 1.0, (x,))

    with pytest.raises(torch_onnx_fx.OnnxExporterError, match="no_translation"):
        torch_onnx_fx.export(Bad(), (torch.rand(3) + 1,), verbose=False)


def test_autocast_region_keeps_its_casts():
    class Autocast(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 4)

        def forward(self, x):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                y = self.linear(x)
            return y.float() * 2, y.dtype == torch.bfloat16

    model = Autocast().eval()
    x = torch.randn(3, 4)
    program = torch_onnx_fx.export(model, (x,), verbose=False)
    gemm = next(n for n in program.model.graph if n.op_type in ("Gemm", "MatMul"))
    # The region's inputs are rounded to bfloat16; ONNX Runtime's CPU provider has no bfloat16
    # Gemm, so the product is computed from them in float32 and rounded back (KernelGapPass).
    widened = gemm.inputs[0].producer()
    assert widened.op_type == "Cast" and widened.inputs[0].dtype == ir.DataType.BFLOAT16
    with torch.no_grad():
        expected = model(x)[0]
    # bfloat16 matmul: agreement to bfloat16 precision, in ONNX Runtime and the reference evaluator.
    torch.testing.assert_close(program(x)[0], expected, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(program.call_reference(x)[0], expected, rtol=2e-2, atol=2e-2)



def test_associative_scan():
    from torch._higher_order_ops.associative_scan import associative_scan

    class PrefixSum(nn.Module):
        def forward(self, x):
            return associative_scan(lambda a, b: a + b, x, dim=0, combine_mode="generic")

    assert_matches_eager(PrefixSum(), (torch.randn(5, 3),))


def test_no_grad_region_returning_complex_values_is_inlined():
    """Llama 4 makes its complex rotary frequencies under ``torch.no_grad()``: the region becomes a
    ``wrap_with_set_grad_enabled`` call returning a complex tensor, inlined like any other."""

    class Rotary(torch.nn.Module):
        def forward(self, x):
            with torch.no_grad():
                angles = torch.arange(x.shape[-1], dtype=torch.float32) * 0.5
                frequencies = torch.polar(torch.ones_like(angles), angles)
            rotated = torch.complex(x, x.flip(-1)) * frequencies
            return torch.view_as_real(rotated).flatten(-2)

    assert_matches_eager(Rotary().eval(), (torch.randn(2, 3, 8),))
