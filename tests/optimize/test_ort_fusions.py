"""fusion="onnxruntime": ONNX Runtime's fused operators where they compute what the model does,
run in ONNX Runtime with its default session options and compared with eager; the patterns
they would compute differently are left alone."""

from __future__ import annotations

import pytest
import torch

from helpers import assert_matches_eager
from tests.optimize.test_fusion import _llama, _ops
from tools.benchmarks import decode_bench

pytest.importorskip("transformers")


def _tokens(batch, length):
    ids = torch.randint(3, 100, (batch, length), generator=torch.Generator().manual_seed(length))
    return {"input_ids": ids, "attention_mask": torch.ones(batch, length, dtype=torch.int64)}


_SHAPES = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}


@pytest.mark.parametrize("opset, standalone", [(20, "ReduceMean"), (23, "RMSNormalization")])
def test_llama_residual_norms_become_skip_simplified_layer_norms(opset, standalone):
    program = assert_matches_eager(
        _llama(), (), _tokens(2, 9), more_inputs=[((), _tokens(3, 5))], dynamic_shapes=_SHAPES,
        opset_version=opset, fusion="onnxruntime",
    )
    ops = _ops(program)
    # Two layers: every norm after a residual sum (three inside, the final one) is fused with the
    # sum; the first layer's input norm has none and stays the decomposition or the standard's.
    assert ops["SkipSimplifiedLayerNormalization"] == 4
    assert ops[standalone] == 1
    assert program.model_proto.opset_import and "com.microsoft" in {o.domain for o in program.model_proto.opset_import}


class _ResidualNorm(torch.nn.Module):
    def __init__(self, dtype=torch.float32) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(8, dtype=dtype) + 0.5)

    def forward(self, x, skip):
        total = x + skip
        normalized = total * torch.rsqrt(total.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * normalized, total * 2


@pytest.mark.parametrize(
    "x_shape, skip_shape, dtype, fused",
    [
        ((2, 5, 8), (2, 5, 8), torch.float32, True),
        ((10, 8), (10, 8), torch.float32, True),
        ((2, 5, 8), (1, 5, 8), torch.float32, False),
        ((2, 5, 8), (2, 5, 8), torch.float64, False),
        ((2, 3, 5, 8), (2, 3, 5, 8), torch.float32, False),
    ],
    ids=["3-d", "2-d", "broadcast-skip", "float64", "4-d"],
)
def test_skip_norm_only_where_the_kernel_takes_it(x_shape, skip_shape, dtype, fused):
    model = _ResidualNorm(dtype).eval()
    x, skip = torch.randn(x_shape, dtype=dtype), torch.randn(skip_shape, dtype=dtype)
    program = assert_matches_eager(model, (x, skip), fusion="onnxruntime")
    assert (_ops(program)["SkipSimplifiedLayerNormalization"] == 1) == fused


def test_standard_fusion_leaves_the_residual_sum_apart():
    program = assert_matches_eager(_ResidualNorm().eval(), (torch.randn(2, 5, 8), torch.randn(2, 5, 8)))
    assert "SkipSimplifiedLayerNormalization" not in _ops(program)


def _padded(batch, length):
    tokens = _tokens(batch, length)
    tokens["attention_mask"][1:, : length // 3] = 0  # left padding: padded query rows see no key at all
    return tokens


@pytest.mark.parametrize("opset", [20, 23])
def test_llama_prefill_attention_is_one_kernel_per_layer(opset):
    program = assert_matches_eager(
        _llama(), (), _padded(2, 9), more_inputs=[((), _tokens(3, 5))], dynamic_shapes=_SHAPES,
        opset_version=opset, fusion="onnxruntime",
    )
    assert _ops(program)["GroupQueryAttention"] == 2
    # The kernel reads [B, S, N * E]: q and k are rotated as the projections give them (ONNX
    # Runtime's RotaryEmbedding, at any opset), not split into heads, rotated and packed back.
    rotary = [n for n in program.model_proto.graph.node if n.op_type == "RotaryEmbedding"]
    assert len(rotary) == 4 and all(n.domain == "com.microsoft" for n in rotary)
    assert _ops(program)["Transpose"] == 0


def _step_inputs(batch, past, seed):
    generator = torch.Generator().manual_seed(seed)
    token = torch.randint(3, 100, (batch, 1), generator=generator)
    mask = torch.ones(batch, past + 1, dtype=torch.int64)
    mask[1:, :2] = 0  # a left-padded row
    cache = [torch.randn(batch, 2, past, 8, generator=generator) for _ in range(4)]
    return token, mask, cache


def test_llama_decode_step_shares_the_cache_with_the_kernel():
    model = _llama()
    model.config.use_cache = True
    past, total = torch.export.Dim("past", min=1, max=60), torch.export.Dim("total", min=2, max=61)
    shapes = ({0: "batch"}, {0: "batch", 1: total}, [{0: "batch", 2: past}] * 4)
    program = assert_matches_eager(
        decode_bench._step(model), _step_inputs(2, 7, 0), dynamic_shapes=shapes, fusion="onnxruntime",
        more_inputs=[(_step_inputs(3, 12, 1), {})],
    )
    ops = _ops(program)
    # Every cache output is the kernel's present: no Concat of a cache is left.
    assert ops["GroupQueryAttention"] == 2
    assert not any(n.op_type == "Concat" and n.input[0].startswith("cache") for n in program.model_proto.graph.node)
    # The moves between the kernel's output and the next product cancel, and are gone.
    assert ops["Identity"] == 0


class _PackedRotary(torch.nn.Module):
    """A projection split into heads, rotated as transformers does, packed back; frequencies
    shared by the batch or given per row."""

    def __init__(self, per_row: bool) -> None:
        super().__init__()
        self.per_row = per_row
        self.projection = torch.nn.Linear(16, 32, bias=False)

    def forward(self, x, positions):
        batch, length, _ = x.shape
        heads = self.projection(x).view(batch, length, 4, 8).transpose(1, 2)
        inverse = 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8))
        frequencies = positions[:, :, None].float() * inverse[None, None, :]  # [b, S, 4]
        angles = torch.cat((frequencies, frequencies), dim=-1)
        cos, sin = angles.cos().unsqueeze(1), angles.sin().unsqueeze(1)
        rotated = torch.cat((-heads[..., 4:], heads[..., :4]), dim=-1)
        return (heads * cos + rotated * sin).transpose(1, 2).reshape(batch, length, -1)


@pytest.mark.parametrize("per_row", [False, True], ids=["shared-positions", "positions-per-row"])
@pytest.mark.parametrize("opset", [20, 23])
def test_rotary_of_packed_heads_is_one_kernel(per_row, opset):
    x = torch.randn(3, 5, 16)
    positions = (torch.arange(5)[None] + torch.tensor([[0], [7], [2]])) if per_row else torch.arange(3, 8)[None]
    other = (torch.randn(2, 6, 16), (torch.arange(6)[None] + torch.tensor([[4], [1]])) if per_row else torch.arange(6)[None])
    shapes = ({0: "batch", 1: "length"}, {0: "batch", 1: "length"} if per_row else {1: "length"})
    program = assert_matches_eager(
        _PackedRotary(per_row).eval(), (x, positions), dynamic_shapes=shapes, more_inputs=[(other, {})],
        opset_version=opset, fusion="onnxruntime",
    )
    rotary = [n for n in program.model_proto.graph.node if n.op_type == "RotaryEmbedding"]
    assert [n.domain for n in rotary] == ["com.microsoft"] and _ops(program)["Transpose"] == 0
