"""normalize/eager_constants.py: floating-point values a model computes from constants alone hold
eager's bits in the graph (AuraFlow's timestep embedding was 8e-4 off eager, torch.onnx's too)."""

from __future__ import annotations

import math

import torch

import torch_onnx_fx
from helpers import assert_matches_eager
from torch_onnx_fx.normalize.eager_constants import EAGER_VALUE, SIZE_LIMIT


def timestep_embedding(timesteps):
    # diffusers' get_timestep_embedding at AuraFlow's scale: the arguments reach 1e6, where an
    # ulp of a frequency (ONNX Runtime's Exp, or numpy's when folded) moves the sine by 0.06.
    half = 128
    exponent = -math.log(10000) * torch.arange(0, half, dtype=torch.float32) / (half - 1)
    arguments = 1000 * (timesteps[:, None].float() * torch.exp(exponent)[None, :])
    return torch.cat([torch.sin(arguments), torch.cos(arguments)], dim=-1)


def _recorded(program):
    """The recorded values' shapes."""
    return [tuple(node.meta[EAGER_VALUE].shape) for node in program.exported_program.graph.nodes if EAGER_VALUE in node.meta]


def test_a_timestep_embedding_holds_eagers_frequencies():
    timesteps = torch.tensor([999.0, 1.0, 517.0])
    program = torch_onnx_fx.export(timestep_embedding, (timesteps,), dynamic_shapes=({0: "batch"},), verbose=False)
    assert _recorded(program) == [(1, 128)]
    assert_matches_eager(
        timestep_embedding, (timesteps,), program=program, rtol=0, atol=2e-6,
        more_inputs=[((torch.tensor([998.0, 3.5]),), {})],
    )


def test_fills_moves_and_large_constants_stay_computations():
    def masked(x):
        mask = torch.full((4, 4), -math.inf).triu(1)  # exact in ONNX: left to the graph
        large = torch.arange(SIZE_LIMIT + 1, dtype=torch.float32).mul(1e-4).exp()  # too large to store
        return (x + mask).softmax(-1), x.sum() + large

    program = torch_onnx_fx.export(masked, (torch.randn(2, 4, 4),), verbose=False)
    assert _recorded(program) == []
    assert_matches_eager(masked, (torch.randn(2, 4, 4),), program=program, rtol=1e-6, atol=0)


def test_a_constant_of_a_symbolic_size_stays_a_computation():
    def scaled(x):
        return x * torch.arange(x.shape[0], dtype=torch.float32).mul(0.1).exp()[:, None]

    program = torch_onnx_fx.export(scaled, (torch.randn(5, 3),), dynamic_shapes=({0: "n"},), verbose=False)
    assert _recorded(program) == []
    assert_matches_eager(scaled, (torch.randn(5, 3),), program=program, rtol=1e-6, atol=1e-6, more_inputs=[((torch.randn(7, 3),), {})])


def test_a_rotary_tables_frequencies_are_recorded_where_the_table_is_too_large():
    # The table (2 x 8192 positions x 4) is computed by the graph from eager's frequencies.
    def rotary(x):
        frequencies = 1.0 / (10000 ** (torch.arange(0, 8, 2, dtype=torch.float32) / 8))
        angles = torch.arange(8192, dtype=torch.float32)[:, None] * frequencies[None, :]
        table = torch.stack([angles.cos(), angles.sin()])
        return x * table[:, : x.shape[1]].sum()

    x = torch.randn(3, 5)
    program = torch_onnx_fx.export(rotary, (x,), dynamic_shapes=({1: "n"},), verbose=False)
    # The frequencies and the positions, not the table or the angles (32768 elements).
    assert sorted(_recorded(program)) == [(1, 4), (8192, 1)]
    assert_matches_eager(rotary, (x,), program=program, rtol=1e-6, atol=1e-6, more_inputs=[((torch.randn(3, 9),), {})])


def test_the_program_stays_a_valid_exported_program():
    """The values are records on the nodes, the graph unchanged: the program (and one the caller
    passed in) saves and decomposes as before."""
    import io

    class Embedding(torch.nn.Module):
        def forward(self, timesteps):
            return timestep_embedding(timesteps)

    captured = torch.export.export(Embedding(), (torch.tensor([999.0, 1.0]),))
    program = torch_onnx_fx.export(captured, verbose=False)
    assert _recorded(program) == [(1, 128)]
    for exported in (captured, program.exported_program):
        torch.export.save(exported, io.BytesIO())
        exported.run_decompositions()


def test_a_constant_read_twice_by_one_node_is_still_read_by_the_next():
    # ``ones * ones`` reads ``ones`` twice; the pass once dropped ``ones`` after that reader and
    # left the exponential after it to ONNX Runtime.
    def scaled(x):
        ones = torch.ones(64)
        return x * torch.exp((ones + ones * ones) * 0.37)

    program = torch_onnx_fx.export(scaled, (torch.randn(3, 64),), verbose=False)
    recorded = [node.target for node in program.exported_program.graph.nodes if EAGER_VALUE in node.meta]
    assert recorded == [torch.ops.aten.exp.default], recorded
    assert_matches_eager(scaled, (torch.randn(3, 64),), program=program, rtol=0, atol=0)
