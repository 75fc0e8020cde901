"""torchao's dequantize_affine (weight-only quantized Linear layers) as DequantizeLinear, run in
ONNX Runtime with its default session options against the torchao model."""

from __future__ import annotations

import collections

import pytest
import torch

import torch_onnx_fx
from helpers import assert_matches_eager
from torch_onnx_fx.ops.affine_quantized import affine_layout

torchao = pytest.importorskip("torchao", reason="dequantize_affine is torchao's operator")


class _Dequantize(torch.nn.Module):
    """dequantize_affine of given integers and parameters, returned as they are."""

    def __init__(self, block_size: list[int], output_dtype: torch.dtype = torch.float32):
        super().__init__()
        self.block_size, self.output_dtype = block_size, output_dtype

    def forward(self, q: torch.Tensor, scale: torch.Tensor, zero_point: torch.Tensor | None) -> torch.Tensor:
        return torch.ops.torchao.dequantize_affine(
            q, self.block_size, scale, zero_point, q.dtype, output_dtype=self.output_dtype
        )


def _ops(program) -> collections.Counter:
    return collections.Counter(node.op_type for node in program.model.graph)


def _parameters(shape, block_size, dtype, zero_point_dtype, seed=0):
    generator = torch.Generator().manual_seed(seed)
    low, high = (-128, 128) if dtype == torch.int8 else (0, 256)
    q = torch.randint(low, high, shape, generator=generator, dtype=torch.int32).to(dtype)
    shared = [n // b for n, b in zip(shape, block_size)]
    scale = torch.rand(shared, generator=generator) * 0.05 + 1e-4
    zero_point = None
    if zero_point_dtype is not None:
        zero_point = torch.randint(low, high, shared, generator=generator, dtype=torch.int32).to(zero_point_dtype)
    return q, scale, zero_point


def test_layouts() -> None:
    assert affine_layout([64, 256], [64, 256]) == ("tensor", None)
    assert affine_layout([64, 256], [1, 256]) == ("axis", 0)
    assert affine_layout([64, 256], [1, 32]) == ("blocked", 1)
    # A blocked axis beside a shared one has no DequantizeLinear form; neither do two blocked axes.
    assert affine_layout([4, 64, 6], [4, 16, 1]) is None
    assert affine_layout([64, 256], [8, 32]) is None
    assert affine_layout([64, 256], [1, 24]) is None


@pytest.mark.parametrize(
    ("shape", "block_size", "dtype", "zero_point_dtype", "opset", "form"),
    [
        ((64, 256), [1, 32], torch.int8, torch.int8, 21, "block_size"),
        ((4, 64, 6), [1, 16, 1], torch.uint8, torch.uint8, 21, "block_size"),
        ((64, 256), [1, 256], torch.int8, None, 20, "axis"),
        ((48, 40), [48, 40], torch.uint8, torch.uint8, 20, None),
        # Below opset 21 a blocked layout is PyTorch's decomposition; a zero point of another
        # dtype, or a bfloat16 result, too.
        ((64, 256), [1, 32], torch.int8, torch.int8, 20, "decomposed"),
        ((64, 256), [1, 32], torch.int8, torch.int32, 21, "decomposed"),
    ],
)
def test_dequantized_exactly(shape, block_size, dtype, zero_point_dtype, opset, form) -> None:
    q, scale, zero_point = _parameters(shape, block_size, dtype, zero_point_dtype)
    program = assert_matches_eager(
        _Dequantize(block_size).eval(), (q, scale, zero_point), rtol=0, atol=0, opset_version=opset
    )
    ops = _ops(program)
    if form == "decomposed":
        assert "DequantizeLinear" not in ops, ops
        return
    assert ops["DequantizeLinear"] == 1, ops
    node = next(node for node in program.model.graph if node.op_type == "DequantizeLinear")
    if form is not None:
        assert form in node.attributes, node


def test_bfloat16_result_is_decomposed() -> None:
    q, scale, zero_point = _parameters((32, 64), [1, 32], torch.int8, torch.int8)
    model = _Dequantize([1, 32], torch.bfloat16).eval()
    program = assert_matches_eager(model, (q, scale.bfloat16(), zero_point), rtol=0, atol=0, opset_version=21)
    assert "DequantizeLinear" not in _ops(program)


def _weight_only(bits: int, granularity, seed: int = 0) -> torch.nn.Module:
    from torchao.quantization import IntxWeightOnlyConfig, quantize_

    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(256, 192), torch.nn.ReLU(), torch.nn.Linear(192, 64)).eval()
    quantize_(model, IntxWeightOnlyConfig(weight_dtype=getattr(torch, f"int{bits}"), granularity=granularity))
    return model


@pytest.mark.parametrize("bits", [4, 8])
def test_weight_only_linear_layers(bits: int) -> None:
    from torchao.quantization.granularity import PerAxis, PerGroup

    x = torch.randn(3, 5, 256)
    for granularity, opset, attribute in ((PerGroup(32), 21, "block_size"), (PerAxis(0), 20, "axis")):
        program = assert_matches_eager(_weight_only(bits, granularity), (x,), opset_version=opset)
        nodes = [node for node in program.model.graph if node.op_type == "DequantizeLinear"]
        assert len(nodes) == 2 and all(attribute in node.attributes for node in nodes), _ops(program)
        # The weights are stored as their integers.
        assert all(node.inputs[0].dtype.name == "INT8" and node.inputs[0].const_value is not None for node in nodes)


def test_apply_weights_takes_the_quantized_state_dict() -> None:
    # torch.export unwraps each quantized weight into layer.parametrizations.weight.original0..2;
    # the torchao model's own state dict names the subclass tensor layer.weight.
    from torchao.quantization.granularity import PerGroup

    exported, other = _weight_only(4, PerGroup(32)), _weight_only(4, PerGroup(32), seed=1)
    x = torch.randn(4, 256)
    program = torch_onnx_fx.export(exported, (x,), opset_version=21, verbose=False)
    program.apply_weights(other.state_dict())
    assert not torch.allclose(exported(x), other(x))
    assert_matches_eager(other, (x,), program=program)


def test_dynamic_int8_activations_and_weights() -> None:
    # torch.onnx fails on the model (no translation of _int_mm).
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 192), torch.nn.ReLU(), torch.nn.Linear(192, 64)).eval()
    quantize_(model, Int8DynamicActivationInt8WeightConfig())
    assert_matches_eager(model, (torch.randn(2, 3, 256),), rtol=0, atol=0)
