"""fusion="onnxruntime": 4-bit weights as MatMulNBits at accuracy level 1, run in ONNX Runtime with
its default session options against the torchao model."""

from __future__ import annotations

import collections

import onnxruntime as ort
import pytest
import torch

import torch_onnx_fx
from helpers import assert_matches_eager
from torch_onnx_fx.errors import StateDictMismatchError

pytest.importorskip("torchao", reason="the weight-only quantized models come from torchao")


def _weight_only(bits: int, granularity, seed: int = 0, device: str = "cpu") -> torch.nn.Module:
    from torchao.quantization import IntxWeightOnlyConfig, quantize_

    torch.manual_seed(seed)
    with torch.device(device):
        model = torch.nn.Sequential(torch.nn.Linear(256, 192), torch.nn.ReLU(), torch.nn.Linear(192, 64, bias=False))
    quantize_(model.eval(), IntxWeightOnlyConfig(weight_dtype=getattr(torch, f"int{bits}"), granularity=granularity))
    return model


def _nodes(program, op_type: str) -> list:
    return [node for node in program.model.graph if node.op_type == op_type]


@pytest.mark.parametrize("shape", [(4, 256), (2, 3, 256), (256,)])
def test_group_wise_int4(shape) -> None:
    from torchao.quantization.granularity import PerGroup

    x = torch.randn(shape)
    program = assert_matches_eager(_weight_only(4, PerGroup(32)), (x,), opset_version=21, fusion="onnxruntime")
    fused = _nodes(program, "MatMulNBits")
    assert len(fused) == 2 and not _nodes(program, "DequantizeLinear"), collections.Counter(n.op_type for n in program.model.graph)
    assert all(node.attributes["accuracy_level"].value == 1 and node.attributes["bits"].value == 4 for node in fused)
    # 192 inputs to the second layer: groups of 32, the largest power-of-two block.
    assert [node.attributes["block_size"].value for node in fused] == [32, 32]
    if len(shape) > 1:
        # MatMulNBits takes the input as it is and adds the bias: no Reshape or Add around it.
        assert {node.op_type for node in program.model.graph} == {"MatMulNBits", "Relu"}


def test_dynamic_leading_dims() -> None:
    from torchao.quantization.granularity import PerGroup

    batch = torch.export.Dim("batch")
    program = assert_matches_eager(
        _weight_only(4, PerGroup(32)), (torch.randn(2, 3, 256),), opset_version=21, fusion="onnxruntime",
        dynamic_shapes=({0: batch},), more_inputs=[((torch.randn(7, 3, 256),), {})],
    )
    assert {node.op_type for node in program.model.graph} == {"MatMulNBits", "Relu"}


def test_per_row_int4_below_opset_21() -> None:
    from torchao.quantization.granularity import PerAxis

    x = torch.randn(5, 256)
    program = assert_matches_eager(_weight_only(4, PerAxis(0)), (x,), opset_version=20, fusion="onnxruntime")
    # One scale per row spans K: 256 is one block, 192 three blocks of 64 sharing it.
    assert [node.attributes["block_size"].value for node in _nodes(program, "MatMulNBits")] == [256, 64]


def test_eight_bit_weights_stay_dequantized() -> None:
    # MatMulNBits at accuracy level 1 has no 8-bit kernel (~25x slower than float).
    from torchao.quantization.granularity import PerGroup

    x = torch.randn(4, 256)
    program = assert_matches_eager(_weight_only(8, PerGroup(32)), (x,), opset_version=21, fusion="onnxruntime")
    assert not _nodes(program, "MatMulNBits") and len(_nodes(program, "DequantizeLinear")) == 2


def test_standard_fusion_keeps_dequantize_linear() -> None:
    from torchao.quantization.granularity import PerGroup

    program = torch_onnx_fx.export(_weight_only(4, PerGroup(32)), (torch.randn(4, 256),), opset_version=21, verbose=False)
    assert not _nodes(program, "MatMulNBits") and len(_nodes(program, "DequantizeLinear")) == 2


def test_meta_export_packs_the_weights_applied_after(tmp_path) -> None:
    from torchao.quantization.granularity import PerGroup

    empty = _weight_only(4, PerGroup(32), device="meta")
    program = torch_onnx_fx.export(
        empty, (torch.randn(4, 256, device="meta"),), opset_version=21, fusion="onnxruntime", verbose=False
    )
    assert len(_nodes(program, "MatMulNBits")) == 2
    real = _weight_only(4, PerGroup(32), seed=3)
    program.apply_weights(real.state_dict())
    x = torch.randn(4, 256)
    assert_matches_eager(real, (x,), program=program)
    path = tmp_path / "model.onnx"
    program.save(path, external_data=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (saved,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    torch.testing.assert_close(torch.from_numpy(saved), real(x), rtol=1e-4, atol=1e-5)


def test_weights_past_four_bits_are_refused_and_nothing_changes() -> None:
    from torchao.quantization.granularity import PerGroup

    model = _weight_only(4, PerGroup(32))
    x = torch.randn(4, 256)
    program = torch_onnx_fx.export(model, (x,), opset_version=21, fusion="onnxruntime", verbose=False)
    before = program(x)[0]
    with pytest.raises(StateDictMismatchError, match="4-bit"):
        program.apply_weights(_weight_only(8, PerGroup(32), seed=1).state_dict())
    torch.testing.assert_close(program(x)[0], before, rtol=0, atol=0)


def test_meta_export_of_eight_bit_weights_is_not_packed() -> None:
    # Without data the declared range (quant_min/quant_max: -128..127) decides: not 4 bits.
    from torchao.quantization.granularity import PerGroup

    program = torch_onnx_fx.export(
        _weight_only(8, PerGroup(32), device="meta"), (torch.randn(4, 256, device="meta"),), opset_version=21,
        fusion="onnxruntime", verbose=False,
    )
    assert not _nodes(program, "MatMulNBits") and len(_nodes(program, "DequantizeLinear")) == 2


class _Projections(torch.nn.Module):
    """q/k/v-style products of one input, with an optional bias, and one of another input."""

    def __init__(self, bias: bool) -> None:
        super().__init__()
        self.q, self.k, self.v = (torch.nn.Linear(64, n, bias=bias) for n in (64, 32, 32))
        self.out = torch.nn.Linear(64, 16, bias=bias)

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        return self.out(q * torch.cat([k, v], -1)), v


def _quantized_projections(bias: bool, seed: int = 0, device: str = "cpu") -> torch.nn.Module:
    from torchao.quantization import IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    torch.manual_seed(seed)
    with torch.device(device):
        model = _Projections(bias).eval()
    quantize_(model, IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)))
    return model


@pytest.mark.parametrize("bias", [False, True], ids=["no-bias", "bias"])
def test_products_of_one_input_are_one_packed_product(bias) -> None:
    x = torch.randn(2, 3, 64)
    model = _quantized_projections(bias)
    program = assert_matches_eager(model, (x,), opset_version=21, fusion="onnxruntime",
                                   dynamic_shapes=({0: "batch", 1: "length"},), more_inputs=[((torch.randn(1, 5, 64),), {})])
    fused = _nodes(program, "MatMulNBits")
    # q, k and v as one product of 128 rows, split; the output projection reads another input.
    assert sorted(node.attributes["N"].value for node in fused) == [16, 128] and len(_nodes(program, "Split")) == 1
    # The packed weights are remade from a new quantized state dict.
    other = _quantized_projections(bias, seed=5)
    program.apply_weights(other.state_dict())
    assert_matches_eager(other, (x,), program=program)


def test_meta_export_packs_the_projections_applied_after(tmp_path) -> None:
    empty = _quantized_projections(True, device="meta")
    program = torch_onnx_fx.export(empty, (torch.randn(2, 64, device="meta"),), opset_version=21, fusion="onnxruntime",
                                   verbose=False)
    assert len(_nodes(program, "MatMulNBits")) == 2
    real = _quantized_projections(True, seed=2)
    program.apply_weights(real.state_dict())
    path = tmp_path / "model.onnx"
    program.save(path, external_data=True)
    x = torch.randn(2, 64)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    saved = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    expected = real(x)
    assert len(saved) == len(expected)
    for got, want in zip(saved, expected):
        torch.testing.assert_close(torch.from_numpy(got), want, rtol=1e-4, atol=1e-5)
