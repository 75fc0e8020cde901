"""The ``fusion`` option: the ONNX standard's fused operators at opset 23, exact against eager,
and nothing fused where the pattern differs from what the operator computes."""

from __future__ import annotations

import collections

import pytest
import torch

from helpers import assert_matches_eager
from torch_onnx_fx import export
from torch_onnx_fx.errors import UnsupportedArgumentError

transformers = pytest.importorskip("transformers")


def _ops(program) -> collections.Counter:
    return collections.Counter(node.op_type for node in program.model_proto.graph.node)


def _llama():
    config = transformers.LlamaConfig(
        vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=64, use_cache=False,
    )
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def _tokens(batch, length):
    ids = torch.randint(3, 100, (batch, length), generator=torch.Generator().manual_seed(length))
    mask = torch.ones(batch, length, dtype=torch.int64)
    mask[1:, : length // 3] = 0  # left padding: padded query rows see no key at all
    return {"input_ids": ids, "attention_mask": mask}


_SHAPES = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}


def test_llama_fuses_to_standard_operators_at_opset_23():
    program = assert_matches_eager(
        _llama(), (), _tokens(2, 9), more_inputs=[((), _tokens(3, 5))], dynamic_shapes=_SHAPES, opset_version=23,
    )
    ops = _ops(program)
    # Two layers: attention and rotary embedding (of q and k) per layer, two norms per layer and a final one.
    assert (ops["Attention"], ops["RotaryEmbedding"], ops["RMSNormalization"]) == (2, 4, 5)


def test_fusion_none_keeps_the_decomposition():
    program = assert_matches_eager(
        _llama(), (), _tokens(2, 9), dynamic_shapes=_SHAPES, opset_version=23, fusion="none",
    )
    ops = _ops(program)
    assert not ops.keys() & {"Attention", "RotaryEmbedding", "RMSNormalization"}


def test_default_opset_has_no_fused_operators():
    program = assert_matches_eager(_llama(), (), _tokens(2, 9), dynamic_shapes=_SHAPES)
    assert not _ops(program).keys() & {"Attention", "RotaryEmbedding", "RMSNormalization"}


class _Norm(torch.nn.Module):
    def __init__(self, dim: int, scale_shape) -> None:
        super().__init__()
        self.dim = dim
        self.weight = torch.nn.Parameter(torch.rand(scale_shape) + 0.5)

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(self.dim, keepdim=True) + 1e-6))


@pytest.mark.parametrize(
    "dim, scale_shape, fused",
    [(-1, (8,), True), (1, (8,), False), (-1, (5, 1), False)],
    ids=["last-axis", "mean-over-another-axis", "scale-not-per-feature"],
)
def test_rms_normalization_only_where_exact(dim, scale_shape, fused):
    x = torch.randn(2, 5, 8)
    program = assert_matches_eager(_Norm(dim, scale_shape).eval(), (x,), opset_version=23)
    assert ("RMSNormalization" in _ops(program)) == fused


def test_unknown_fusion_is_refused():
    with pytest.raises(UnsupportedArgumentError, match="fusion='fast'"):
        export(torch.nn.ReLU(), (torch.randn(2),), fusion="fast")


class _Rotary(torch.nn.Module):
    """transformers' rotary embedding, or (split != half) a variant RotaryEmbedding does not compute."""

    def __init__(self, split_at_half: bool) -> None:
        super().__init__()
        self.split_at_half = split_at_half

    def forward(self, x, positions):
        dim = x.shape[-1]
        frequencies = positions[None, :, None].float() * torch.arange(dim // 2).float()[None, None, :] * 0.1
        angles = torch.cat((frequencies, frequencies), dim=-1)
        cos, sin = angles.cos().unsqueeze(1), angles.sin().unsqueeze(1)
        cut = dim // 2 if self.split_at_half else dim // 4
        rotated = torch.cat((-x[..., cut:], x[..., :cut]), dim=-1)
        return x * cos + rotated * sin


@pytest.mark.parametrize("split_at_half, fused", [(True, True), (False, False)], ids=["halves", "quarter-split"])
def test_rotary_embedding_only_where_exact(split_at_half, fused):
    x, positions = torch.randn(3, 2, 5, 8), torch.arange(5)
    program = assert_matches_eager(
        _Rotary(split_at_half).eval(), (x, positions), opset_version=23, dynamic_shapes=({0: "batch"}, None),
        more_inputs=[((torch.randn(2, 2, 5, 8), positions), {})],
    )
    assert ("RotaryEmbedding" in _ops(program)) == fused
